"""Migration 0005 renames the two word orders of before: big -> ABCD, little -> CDAB."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("sensors", "0004_gateway_keys_and_emoncms_node_names")]
AFTER = [("sensors", "0005_modbus_rtu_buses_word_orders_64bit")]


@pytest.mark.django_db(transaction=True)
def test_old_word_orders_are_renamed_as_meter_manuals_name_them():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    Node = apps.get_model("sensors", "Node")
    Register = apps.get_model("sensors", "ModbusRegister")
    node = Node.objects.create(name="old-meter", protocol="modbus", modbus_host="10.0.0.1",
                               key_prefix="x", key_hash="y")  # fmt: skip
    Register.objects.create(node=node, key="a", address=0, word_order="big")
    Register.objects.create(node=node, key="b", address=2, word_order="little")
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        apps = executor.loader.project_state(AFTER).apps
        Register = apps.get_model("sensors", "ModbusRegister")
        orders = dict(Register.objects.values_list("key", "word_order"))
        assert orders == {"a": "ABCD", "b": "CDAB"}
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
