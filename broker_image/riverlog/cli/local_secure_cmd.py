"""``riverlog local-secure``: one command for a secured local broker.

A single broker whose only client listener speaks SASL_SSL (SCRAM-SHA-512), with a CA, a
certificate for localhost and an ``admin`` user made on first start and kept under
``<data>/tls`` (``security/local_pki.py``), so a developer can try exactly what production runs:
any Kafka client connects with the printed ``client.properties``. ``make run`` stays the
plaintext broker."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..config import BrokerConfig, ConfigError, parse_set_flags
from ..security.local_pki import ADMIN_USER, client_properties, ensure_local_pki


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "local-secure", help="run a local broker with TLS and SCRAM logins (SASL_SSL)",
        description="Run one broker whose client listener is SASL_SSL with SCRAM-SHA-512. On the first start a "
                    "local CA, a broker certificate and the admin user's password are made under DATA/tls; "
                    "DATA/tls/client.properties is the --command-config for Kafka's tools and riverlog's CLI.")
    p.add_argument("--data", default="./data-secure", help="data directory (default ./data-secure)")
    p.add_argument("--port", type=int, default=9094, help="SASL_SSL port (default 9094)")
    p.add_argument("--controller-port", type=int, default=9095, help="CONTROLLER port, loopback (default 9095)")
    p.add_argument("--metrics-port", type=int, default=9405, help="metrics port (default 9405); 0 picks one")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--advertised-host", default="localhost",
                   help="host name clients are told, also in the certificate (default localhost)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="another broker property (repeatable)")
    p.set_defaults(func=run)


def secured_properties(data: Path, args: argparse.Namespace, password: str, keystore: Path, ca: Path
                       ) -> dict[str, str]:
    scram_login = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                   f'username="{ADMIN_USER}" password="{password}";')
    return {
        "log.dirs": str(data / "log"),
        "listeners": f"SECURE://{args.host}:{args.port},CONTROLLER://127.0.0.1:{args.controller_port}",
        "advertised.listeners": f"SECURE://{args.advertised_host}:{args.port}",
        "listener.security.protocol.map": "SECURE:SASL_SSL,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "SECURE",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.secure.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.secure.scram-sha-512.sasl.jaas.config": scram_login,
        "listener.name.secure.ssl.keystore.type": "PEM",
        "listener.name.secure.ssl.keystore.location": str(keystore),
        "listener.name.secure.ssl.truststore.type": "PEM",
        "listener.name.secure.ssl.truststore.location": str(ca),
        "bootstrap.scram.credentials": f"SCRAM-SHA-512=[name={ADMIN_USER},password={password}]",
        "metrics.host": args.host,
        "metrics.port": str(args.metrics_port),
    }


def run(args: argparse.Namespace) -> int:
    from .broker_cmd import check_security, run_broker

    data = Path(args.data).resolve()
    try:
        extra = parse_set_flags(args.set)
        files = ensure_local_pki(data / "tls", [args.advertised_host, args.host])
        password = files.password.read_text().strip()
        files.client_properties.write_text(client_properties(files))
        props = {**secured_properties(data, args, password, files.keystore, files.ca), **extra}
        config = BrokerConfig(props, sources=dict.fromkeys(props, "local-secure"))
        check_security(config)
    except (ConfigError, ValueError, OSError) as exc:
        print(f"riverlog local-secure: {exc}", file=sys.stderr)
        return 2
    bootstrap = f"{args.advertised_host}:{args.port}"
    print(f"Riverlog with SASL_SSL on {bootstrap} (SCRAM-SHA-512, user {ADMIN_USER}; CA {files.ca})\n"
          f"connect with:  riverlog topics list --bootstrap-server {bootstrap} "
          f"--command-config {files.client_properties}\n"
          f"(the same file works as Kafka's --command-config and as a Java client's properties)", flush=True)
    try:
        run_broker(config)
    except OSError as exc:
        print(f"riverlog local-secure: {exc} (is another broker using port {args.port} or {args.controller_port}?)",
              file=sys.stderr)
        return 1
    return 0
