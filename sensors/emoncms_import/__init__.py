"""A whole emoncms site brought here (`manage.py import_emoncms`): its inputs, process lists,
feeds and their data, read from a backup archive or a running emoncms."""
