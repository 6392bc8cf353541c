"""Kopf handlers; importing ``riverlog_operator.app`` registers them."""
