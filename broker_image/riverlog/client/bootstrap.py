"""Parsing of bootstrap strings: ``host:port[,host:port...]`` (IPv6 hosts in brackets)."""

from __future__ import annotations

DEFAULT_PORT = 9092


def parse_address(text: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """``"host:port"``, ``"host"`` or ``"[::1]:9092"`` to ``(host, port)``."""
    text = text.strip()
    if not text:
        raise ValueError("empty broker address")
    if text.startswith("["):
        # Brackets are the only unambiguous way to write an IPv6 address with a port.
        end = text.find("]")
        if end < 0:
            raise ValueError(f"unterminated '[' in broker address {text!r}")
        host, rest = text[1:end], text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"unexpected text after ']' in broker address {text!r}")
        port_text = rest[1:] if rest else ""
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    elif ":" in text:
        raise ValueError(f"IPv6 broker address {text!r} needs brackets: [addr]:port")
    else:
        host, port_text = text, ""
    if not host:
        raise ValueError(f"missing host in broker address {text!r}")
    if not port_text:
        return host, default_port
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"port {port_text!r} in broker address {text!r} is not a number") from None
    if not 0 < port < 65536:
        raise ValueError(f"port {port} in broker address {text!r} is out of range")
    return host, port


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """Split a comma-separated bootstrap list; at least one address is required."""
    addresses = [parse_address(part) for part in text.split(",") if part.strip()]
    if not addresses:
        raise ValueError("no bootstrap servers given (expected host:port[,host:port])")
    return addresses


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
