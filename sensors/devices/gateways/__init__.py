"""Radio gateways: turn serial lines from JeeLib (RFM12B/RFM69) and Ciseco LLAP radios into
readings posted through the ingest API. The parsers are pure; `manage.py bms_gateway` wires
them to a serial port (or a file/stdin) and to HTTP."""
