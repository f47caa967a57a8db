"""Herald: webhook delivery that never loses an accepted intent."""

# The one place the version is written: the package's metadata reads it at build time
# (pyproject.toml, [tool.setuptools.dynamic]), and `herald --version`, /healthz, the OpenAPI
# document and the User-Agent of every delivery read it here. Herald, both clients and the
# chart are released together under this number (CHANGELOG.md).
__version__ = "1.0.0"
