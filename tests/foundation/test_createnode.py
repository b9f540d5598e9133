from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sensors.models import Node

pytestmark = pytest.mark.django_db


def _run(*args: str) -> list[str]:
    out = StringIO()
    call_command("createnode", *args, stdout=out)
    return out.getvalue().strip().splitlines()


def test_it_prints_a_working_key_as_the_last_line_and_stores_only_its_hash():
    lines = _run("emontx1", "--node-id", "10", "--interval", "5")
    key = lines[-1]
    assert len(key) == 32 and all(c in "0123456789abcdef" for c in key)
    node = Node.objects.get(name="emontx1")
    assert node.node_id == 10 and node.interval == 5
    assert node.check_key(key)
    assert key not in (node.key_hash, node.key_prefix * 4)
    assert Node.for_key(key) == node
    assert Node.for_key(key[:-1] + ("0" if key[-1] != "0" else "1")) is None


def test_each_node_gets_a_different_key():
    assert _run("a")[-1] != _run("b")[-1]


def test_duplicate_name_is_refused_clearly():
    _run("emontx1")
    with pytest.raises(CommandError, match="already exists"):
        _run("emontx1")


def test_bad_node_id_is_refused_and_nothing_is_stored():
    with pytest.raises(CommandError, match="node_id"):
        _run("radio", "--node-id", "999")
    assert not Node.objects.exists()


def test_rotate_gives_a_new_key_and_the_old_one_stops_working():
    old = _run("emontx1")[-1]
    new = _run("emontx1", "--rotate")[-1]
    node = Node.objects.get(name="emontx1")
    assert new != old and node.check_key(new) and not node.check_key(old)
