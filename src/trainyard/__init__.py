"""trainyard: a toolkit to stand up and run a multi-tenant GPU training platform on Kubernetes."""

__version__ = "0.1.0"
