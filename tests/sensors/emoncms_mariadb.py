"""An emoncms database in the real MariaDB, dumped by the real mysqldump.

A dump in mysqldump's format comes from mysqldump, never from a script of ours that imitates
it (issue #26: our own imitation wrote one row per statement line, MariaDB's tool does not,
and every real emonSD backup failed to import). `scratch_database()` makes a database of a
unique name on the MariaDB at 127.0.0.1:3306 (root, no password: the CI machine's), with
emoncms's `input` and `feeds` tables as emoncms's own schema files define them
(Modules/input/input_schema.php, Modules/feed/feed_schema.php), a MySQL-engine feed table
(`feed_<id>`: time, data) and a part of the dashboard module's table, whose rows the import
must skip; `dump()` runs `mysqldump`/`mariadb-dump` on it with the options given.

Rows go in as hex literals (`_utf8mb4 X'...'`), so no quoting of ours stands between a
value and what the server stores.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

HOST, PORT, USER = "127.0.0.1", "3306", "root"
CLIENT_TIMEOUT_S = 60

# Modules/input/input_schema.php and Modules/feed/feed_schema.php, column for column, in the
# order emoncms creates them (db_schema_setup: the schema array's order).
CREATE_TABLES = """
CREATE TABLE `input` (
  `id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY,
  `userid` int(11),
  `name` text,
  `description` text DEFAULT '',
  `nodeid` text,
  `processList` text,
  `time` int(10),
  `value` float
) DEFAULT CHARSET=utf8mb4;
CREATE TABLE `feeds` (
  `id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY,
  `name` text,
  `userid` int(11),
  `tag` text,
  `time` int(10),
  `value` double,
  `datatype` int(11) NOT NULL,
  `public` tinyint(1) DEFAULT 0,
  `size` int(11),
  `engine` int(11) NOT NULL DEFAULT 0,
  `server` int(11) NOT NULL DEFAULT 0,
  `options` text,
  `processList` text,
  `unit` varchar(10) DEFAULT ''
) DEFAULT CHARSET=utf8mb4;
CREATE TABLE `dashboard` (
  `id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY,
  `userid` int(11),
  `content` mediumtext,
  `name` varchar(30) DEFAULT 'no name',
  `alias` varchar(20)
) DEFAULT CHARSET=utf8mb4;
"""
INPUT_COLUMNS = ("id", "userid", "nodeid", "name", "description", "processList", "time", "value")
FEED_COLUMNS = ("id", "name", "userid", "tag", "time", "value", "datatype", "public", "size",
                "engine", "server", "processList", "unit")  # fmt: skip


def client() -> str | None:
    return shutil.which("mariadb") or shutil.which("mysql")


def dump_tools() -> list[str]:
    """MariaDB ships its dump tool as `mariadb-dump` and, the name emoncms's backup module
    calls, `mysqldump`: both, when they are installed."""
    return [tool for tool in ("mysqldump", "mariadb-dump") if shutil.which(tool)]


def unreachable() -> str | None:
    """Why a test cannot use the real MariaDB here, or None when it can."""
    if client() is None or not dump_tools():
        return "the mariadb client and mysqldump are not installed"
    try:
        _sql("SELECT 1")
    except (subprocess.SubprocessError, OSError) as exc:
        return f"MariaDB at {HOST}:{PORT} is not reachable as {USER}: {exc}"
    return None


def tool_version(tool: str = "mysqldump") -> str:
    """`mysqldump  Ver 10.19 Distrib 10.11.19-MariaDB, ...` as the tool says it."""
    return subprocess.run([tool, "--version"], capture_output=True, text=True, check=True,
                          timeout=CLIENT_TIMEOUT_S).stdout.strip()  # fmt: skip


def _sql(statements: str, database: str | None = None) -> str:
    command = [client() or "mariadb", f"--host={HOST}", f"--port={PORT}", f"--user={USER}",
               "--default-character-set=utf8mb4", "--batch", "--skip-column-names",
               "--connect-timeout=5"]  # fmt: skip
    if database:
        command.append(database)
    done = subprocess.run(command, input=statements.encode(), capture_output=True,
                          timeout=CLIENT_TIMEOUT_S, check=False)  # fmt: skip
    if done.returncode:
        raise subprocess.CalledProcessError(done.returncode, command, done.stdout, done.stderr)
    return done.stdout.decode()


def literal(value: object) -> str:
    """A value for the server, as hex where it is text or bytes (nothing to escape)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, bytes):
        return f"X'{value.hex()}'" if value else "''"
    return f"_utf8mb4 X'{str(value).encode().hex()}'" if value else "''"


def _inserts(table: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    names = ", ".join(f"`{c}`" for c in columns)
    return "".join(
        f"INSERT INTO `{table}` ({names}) VALUES ({', '.join(map(literal, row))});\n"
        for row in rows
    )


@contextmanager
def scratch_database(
    inputs: Sequence[Sequence[object]],
    feeds: Sequence[Sequence[object]],
    *,
    extra_sql: str = "",
) -> Iterator[str]:
    """A database of a unique name holding emoncms's tables with these rows (INPUT_COLUMNS,
    FEED_COLUMNS), the MySQL-engine table `feed_5` of 2,000 points and a dashboard whose
    content looks like SQL; dropped afterwards."""
    name = f"bms_emoncms_{uuid.uuid4().hex[:12]}"
    _sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    try:
        feed_5 = ",".join(f"({1_700_000_000 + 10 * i},{230 + i % 7}.5)" for i in range(2000))
        _sql(
            CREATE_TABLES
            + _inserts("input", INPUT_COLUMNS, inputs)
            + _inserts("feeds", FEED_COLUMNS, feeds)
            + "CREATE TABLE `feed_5` (`time` int(10) unsigned NOT NULL, `data` float);\n"
            + f"INSERT INTO `feed_5` VALUES {feed_5};\n"
            + _inserts(
                "dashboard",
                ("id", "userid", "content", "name", "alias"),
                [
                    (
                        1,
                        1,
                        "<div>INSERT INTO `input` VALUES (99,1,'x','y','','',0,0);</div> -- /*",
                        "Home; */",
                        "home",
                    ),
                ],
            )  # fmt: skip
            + extra_sql,
            name,
        )
        yield name
    finally:
        _sql(f"DROP DATABASE IF EXISTS `{name}`")


def dump(database: str, options: Sequence[str] = (), tool: str = "mysqldump") -> bytes:
    """What `tool` writes for `database` with `options` (emoncms's backup module runs
    `mysqldump -u.. -p.. emoncms`: no options)."""
    command = [tool, f"--host={HOST}", f"--port={PORT}", f"--user={USER}", *options, database]
    return subprocess.run(command, capture_output=True, check=True,
                          timeout=CLIENT_TIMEOUT_S).stdout  # fmt: skip
