"""The pinned upstream toolchain: built from Go modules, cached outside the repo."""
