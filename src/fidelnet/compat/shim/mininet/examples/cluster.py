"""Mininet's cluster edition, refused: see fidelnet.compat.cluster."""

from fidelnet.compat.cluster import refuse

refuse(__name__)
