"""``riverlog schemas list|get|register|check|config``: a schema registry's REST API (Riverlog's or
Confluent's) from the command line."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from ..config import ConfigError
from .schemas_connection import CA_ENV, DEFAULT_URL, URL_ENV, USER_INFO_ENV, Connection, connection
from .table import format_table

V1_JSON = "application/vnd.schemaregistry.v1+json"


class RegistryCallError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        code = body.get("error_code") if isinstance(body, dict) else None
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{message} (HTTP {status}{f', error code {code}' if code else ''})")
        self.status = status
        self.code = code


def call(conn: Connection, method: str, path: str, body: object = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(conn.url.rstrip("/") + path, data=data, method=method,
                                     headers={"Content-Type": V1_JSON, "Accept": V1_JSON, **conn.headers})
    try:
        with urllib.request.urlopen(request, timeout=30, context=conn.ssl_context) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        payload = exc.read()
        try:
            parsed: Any = json.loads(payload)
        except ValueError:
            parsed = payload.decode(errors="replace")
        raise RegistryCallError(exc.code, parsed) from None


def quoted(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("schemas", help="list, read, register and check schemas in a schema registry",
                       description="Talk to a schema registry (Confluent's REST API) at --url, default "
                                   f"the --config file's url, ${URL_ENV} or {DEFAULT_URL}.")
    p.add_argument("--url", default="", help="the registry's URL")
    p.add_argument("--config", default="", metavar="FILE",
                   help="client properties as Confluent's clients name them: basic.auth.credentials.source, "
                        "basic.auth.user.info, ssl.ca.location, ssl.certificate.location, ssl.key.location, url")
    p.add_argument("--user", default="", metavar="USER:PASSWORD",
                   help=f"basic auth credentials (basic.auth.user.info; or ${USER_INFO_ENV})")
    p.add_argument("--ca-file", default="", metavar="FILE",
                   help=f"PEM CA certificates that sign an https registry's certificate (ssl.ca.location; "
                        f"or ${CA_ENV})")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    ls = actions.add_parser("list", help="subjects with their latest version, id and type")
    ls.add_argument("--prefix", default="", help="only subjects starting with this")
    ls.add_argument("--deleted", action="store_true", help="include soft-deleted subjects")
    ls.set_defaults(func=run_list)

    get = actions.add_parser("get", help="print a schema by subject (and version) or by id")
    get.add_argument("subject", nargs="?", help="the subject")
    get.add_argument("--version", default="latest", help="a version number or latest (default)")
    get.add_argument("--id", type=int, help="a schema id instead of a subject")
    get.set_defaults(func=run_get)

    for name, helptext, func in (("register", "register a schema under a subject", run_register),
                                 ("check", "is a schema compatible with a subject's versions (exit 1 if not)",
                                  run_check)):
        q = actions.add_parser(name, help=helptext)
        q.add_argument("subject")
        source = q.add_mutually_exclusive_group(required=True)
        source.add_argument("--file", help="the schema's file (.avsc, .proto, .json)")
        source.add_argument("--schema", help="the schema's text")
        q.add_argument("--type", default="AVRO", choices=("AVRO", "PROTOBUF", "JSON"), help="default AVRO")
        q.add_argument("--normalize", action="store_true", help="normalize=true")
        if name == "check":
            q.add_argument("--version", default=None, help="check against this version only (default: the "
                                                           "versions the subject's compatibility mode names)")
        q.set_defaults(func=func)

    cfg = actions.add_parser("config", help="show or set the compatibility mode, global or of a subject")
    cfg.add_argument("subject", nargs="?", help="a subject (default: the global setting)")
    cfg.add_argument("--set", dest="level", metavar="MODE",
                     help="NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE")
    cfg.set_defaults(func=run_config)


def _guarded(args: argparse.Namespace, work: Any) -> int:
    try:
        args.conn = connection(args.url, config=args.config, user=args.user, ca_file=args.ca_file)
    except (ConfigError, OSError) as exc:
        print(f"riverlog schemas {args.action}: {exc}", file=sys.stderr)
        return 2
    try:
        result: int = work()
        return result
    except RegistryCallError as exc:
        print(f"riverlog schemas {args.action}: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"riverlog schemas {args.action}: cannot reach {args.conn.url}: {exc}", file=sys.stderr)
        return 1


def run_list(args: argparse.Namespace) -> int:
    def work() -> int:
        query = urllib.parse.urlencode({"subjectPrefix": args.prefix, "deleted": str(args.deleted).lower()})
        rows = []
        for subject in call(args.conn, "GET", f"/subjects?{query}"):
            latest = call(args.conn, "GET", f"/subjects/{quoted(subject)}/versions/latest"
                                           f"?deleted={str(args.deleted).lower()}")
            rows.append([subject, latest["version"], latest["id"], latest.get("schemaType", "AVRO")])
        print(format_table(["subject", "latest version", "id", "type"], rows))
        return 0

    return _guarded(args, work)


def run_get(args: argparse.Namespace) -> int:
    def work() -> int:
        if args.id is not None:
            found = call(args.conn, "GET", f"/schemas/ids/{args.id}")
            print(f"# id {args.id}, type {found.get('schemaType', 'AVRO')}")
        elif args.subject:
            found = call(args.conn, "GET", f"/subjects/{quoted(args.subject)}/versions/{args.version}")
            print(f"# subject {found['subject']}, version {found['version']}, id {found['id']}, "
                  f"type {found.get('schemaType', 'AVRO')}")
        else:
            raise ValueError("give a subject or --id")
        for ref in found.get("references") or []:
            print(f"# reference {ref['name']}: subject {ref['subject']} version {ref['version']}")
        text = found["schema"]
        try:
            print(json.dumps(json.loads(text), indent=2))
        except ValueError:
            print(text)
        return 0

    return _guarded(args, work)


def _body(args: argparse.Namespace) -> dict[str, Any]:
    text = Path(args.file).read_text() if args.file else args.schema
    body: dict[str, Any] = {"schema": text}
    if args.type != "AVRO":
        body["schemaType"] = args.type
    return body


def run_register(args: argparse.Namespace) -> int:
    def work() -> int:
        answer = call(args.conn, "POST", f"/subjects/{quoted(args.subject)}/versions"
                                        f"?normalize={str(args.normalize).lower()}", _body(args))
        print(f"registered under {args.subject}: id {answer['id']}")
        return 0

    return _guarded(args, work)


def run_check(args: argparse.Namespace) -> int:
    def work() -> int:
        path = f"/compatibility/subjects/{quoted(args.subject)}/versions"
        if args.version:
            path += f"/{args.version}"
        answer = call(args.conn, "POST", f"{path}?verbose=true&normalize={str(args.normalize).lower()}", _body(args))
        if answer["is_compatible"]:
            print(f"compatible with {args.subject}")
            return 0
        print(f"NOT compatible with {args.subject}:")
        for message in answer.get("messages") or []:
            print(f"  {message}")
        return 1

    return _guarded(args, work)


def run_config(args: argparse.Namespace) -> int:
    def work() -> int:
        path = "/config" + (f"/{quoted(args.subject)}" if args.subject else "")
        if args.level:
            call(args.conn, "PUT", path, {"compatibility": args.level.upper()})
        level = call(args.conn, "GET", path + ("?defaultToGlobal=true" if args.subject else ""))
        print(format_table(["subject", "compatibility"], [[args.subject or "(global)", level["compatibilityLevel"]]]))
        return 0

    return _guarded(args, work)
