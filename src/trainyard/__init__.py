"""trainyard: a toolkit to stand up and run a multi-tenant GPU training platform on Kubernetes."""

__version__ = "0.5.0"
"""The release: its tag is v<version>, its entry the top of docs/changelog.md."""
