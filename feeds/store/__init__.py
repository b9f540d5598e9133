"""The feed store: PHPFina files (phpfina.py), the Redis write buffer that commits to them
(buffer.py), shards and their writers, and service.py, the one API other apps call."""
