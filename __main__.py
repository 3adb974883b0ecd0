"""Pulumi entry point (`pulumi up -s <env>`): everything lives in trainyard.platform."""

from trainyard.platform.components.program import main

main()
