"""Devices we read: serial radio gateways (JeeLib, LLAP), Modbus meters (maps, polls) and MQTT."""
