"""Security on the broker's listeners: TLS (``tls.py``), principals from certificates
(``principal.py``, ``principal_mapping.py``)."""
