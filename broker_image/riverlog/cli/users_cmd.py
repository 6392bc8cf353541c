"""``riverlog users create|list|delete``: SCRAM users kept in the cluster's metadata log.

The same credentials ``kafka-configs --entity-type users --add-config 'SCRAM-SHA-512=[...]'``
manages; a user logs in with them over SASL_PLAINTEXT or SASL_SSL. The password is read from
``--password``, or from the first line of standard input with ``--password -`` (so it stays out
of the shell's history and the process list)."""

from __future__ import annotations

import argparse
import sys

from ..client.admin import AdminClient
from ..client.users import MECHANISM_NUMBERS, delete_scram_user, describe_scram_users, upsert_scram_user
from ..security.sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS
from .client_common import UsageError, client_options, client_security, print_json, run_command
from .table import format_table

MECHANISMS = tuple(MECHANISM_NUMBERS)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = client_options()
    users = sub.add_parser("users", help="create, list and delete SCRAM users",
                           description="Manage the SCRAM users brokers authenticate SASL clients with.")
    actions = users.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    p = actions.add_parser("create", parents=[common], help="create a user, or set a new password")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--password", required=True, metavar="PASSWORD",
                   help="the password; '-' reads it from the first line of standard input")
    p.add_argument("--mechanism", choices=MECHANISMS, default="SCRAM-SHA-512", type=str.upper,
                   help="SCRAM-SHA-512 (default) or SCRAM-SHA-256")
    p.add_argument("--iterations", type=int, default=MIN_ITERATIONS, metavar="N",
                   help=f"PBKDF2 iterations, {MIN_ITERATIONS} (default) to {MAX_ITERATIONS}")
    p.set_defaults(func=lambda a: run_command(lambda: _create(a)))

    p = actions.add_parser("list", parents=[common], help="users and their mechanisms (never a secret)")
    p.add_argument("names", nargs="*", metavar="NAME", help="only these users")
    p.set_defaults(func=lambda a: run_command(lambda: _list(a)))

    p = actions.add_parser("delete", parents=[common], help="delete a user's credential")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--mechanism", choices=MECHANISMS, action="append", type=str.upper,
                   help="the mechanism to remove (repeatable; default: every one the user has)")
    p.set_defaults(func=lambda a: run_command(lambda: _delete(a)))


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient(args.bootstrap_server, security=client_security(args))


async def _create(args: argparse.Namespace) -> int:
    password = sys.stdin.readline().rstrip("\r\n") if args.password == "-" else args.password
    if not password:
        raise UsageError("the password is empty")
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        raise UsageError(f"--iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    async with _admin(args) as admin:
        await upsert_scram_user(admin, args.name, password, mechanism=args.mechanism, iterations=args.iterations)
    if args.output == "json":
        print_json({"user": args.name, "mechanism": args.mechanism, "iterations": args.iterations})
    else:
        print(f"user '{args.name}' can log in with {args.mechanism}")
    return 0


async def _list(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        users = await describe_scram_users(admin, args.names or None)
    if args.output == "json":
        for user in users:
            print_json({"user": user.name,
                        "credentials": [{"mechanism": m, "iterations": i} for m, i in user.credentials]})
        return 0
    rows = [[user.name, mechanism, str(iterations)] for user in users for mechanism, iterations in user.credentials]
    print(format_table(["user", "mechanism", "iterations"], rows))
    return 0


async def _delete(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        mechanisms = args.mechanism
        if not mechanisms:
            found = await describe_scram_users(admin, [args.name])
            mechanisms = [m for user in found for m, _ in user.credentials]
        for mechanism in mechanisms:
            await delete_scram_user(admin, args.name, mechanism=mechanism)
    if args.output == "json":
        print_json({"user": args.name, "deleted": mechanisms})
    else:
        print(f"deleted the {', '.join(mechanisms)} credential{'s' if len(mechanisms) > 1 else ''} of user "
              f"'{args.name}'")
    return 0
