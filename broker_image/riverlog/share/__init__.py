"""KIP-932 share groups: the share-partition state machine (``partition.py``) that partition
leaders keep per (group, topic partition), and what serves it."""
