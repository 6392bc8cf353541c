"""ssl.principal.mapping.rules: Kafka's grammar and its results for the DNs Kafka documents."""

from __future__ import annotations

import pytest
from riverlog.security.principal_mapping import NoMatchingRule, parse_rules, principal_name

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "",
    ",   , , ,",
    ",,RULE://,,,DEFAULT,,",
])
def test_rules_kafka_accepts(rules: str) -> None:
    parse_rules(rules)


@pytest.mark.parametrize("rules", [
    "default",
    "DEFAUL",
    "DEFAULT/L",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_rules_kafka_refuses(rules: str) -> None:
    with pytest.raises(ValueError):
        parse_rules(rules)


def test_the_first_matching_rule_names_the_principal() -> None:
    rules = parse_rules(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]))
    assert principal_name(rules, "CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert principal_name(rules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert principal_name(rules, "cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert principal_name(rules, "cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert principal_name(rules, "OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_an_escaped_comma_inside_a_name() -> None:
    rules = parse_rules(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert principal_name(rules, r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_a_reference_beyond_the_groups_stays_literal() -> None:
    rules = parse_rules("RULE:^CN=(.*?),.*$/$1-$4/")
    assert principal_name(rules, "CN=app,O=x") == "app-$4"


def test_no_matching_rule_means_no_principal() -> None:
    rules = parse_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule):
        principal_name(rules, "CN=someone,OU=Other")
