"""A PEP 517 build backend in the standard library only.

pip builds a package in an isolated environment and fetches the backend
named by ``build-system.requires`` from an index; offline that fails for
setuptools or flit. This backend lives in the tree (``backend-path``), so
``pip install ./clients/python`` needs no network. It knows exactly one
layout: the ``sbx`` package next to this directory, pure Python.
"""

import base64
import hashlib
import os
import tarfile
import zipfile

try:  # Python 3.11+
    import tomllib
except ImportError:  # pragma: no cover - older Pythons read the two keys by hand
    tomllib = None

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE = "sbx"
_TAG = "py3-none-any"


def _project():
    path = os.path.join(_ROOT, "pyproject.toml")
    if tomllib is not None:
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    proj = {}
    section = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line
            elif section == "[project]" and "=" in line:
                key, _, value = line.partition("=")
                value = value.strip()
                if value.startswith('"'):
                    proj[key.strip()] = value.strip('"')
    return proj


def _dist_name(proj):
    return proj["name"].replace("-", "_")


def _metadata(proj):
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + proj["name"],
        "Version: " + proj["version"],
        "Summary: " + proj.get("description", ""),
        "Requires-Python: " + proj.get("requires-python", ">=3.9"),
    ]
    for extra, reqs in (proj.get("optional-dependencies") or {}).items():
        lines.append("Provides-Extra: " + extra)
        for r in reqs:
            lines.append('Requires-Dist: %s ; extra == "%s"' % (r, extra))
    readme = os.path.join(_ROOT, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return ("\n".join(lines) + "\n\n" + body).encode("utf-8")


def _package_files():
    base = os.path.join(_ROOT, _PACKAGE)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".py", ".typed")):
                full = os.path.join(dirpath, name)
                yield full, os.path.relpath(full, _ROOT).replace(os.sep, "/")


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def _write_wheel(wheel_directory, editable):
    proj = _project()
    dist = _dist_name(proj)
    info = "%s-%s.dist-info" % (dist, proj["version"])
    filename = "%s-%s-%s.whl" % (dist, proj["version"], _TAG)
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as zf:

        def add(arcname, data):
            zf.writestr(arcname, data)
            records.append(_record_line(arcname, data))

        if editable:
            add(dist + ".pth", (_ROOT + "\n").encode())
        else:
            for full, arcname in _package_files():
                with open(full, "rb") as f:
                    add(arcname, f.read())
        add(info + "/METADATA", _metadata(proj))
        add(info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: sbx_build\nRoot-Is-Purelib: true\nTag: %s\n" % _TAG).encode())
        records.append(info + "/RECORD,,")
        zf.writestr(info + "/RECORD", "\n".join(records) + "\n")
    return filename


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):
    proj = _project()
    base = "%s-%s" % (_dist_name(proj), proj["version"])
    filename = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as tf:
        for name in ("pyproject.toml", "README.md"):
            tf.add(os.path.join(_ROOT, name), base + "/" + name)
        tf.add(os.path.join(_ROOT, "_backend", "sbx_build.py"), base + "/_backend/sbx_build.py")
        for full, arcname in _package_files():
            tf.add(full, base + "/" + arcname)
        pkg_info = tarfile.TarInfo(base + "/PKG-INFO")
        data = _metadata(proj)
        pkg_info.size = len(data)
        import io

        tf.addfile(pkg_info, io.BytesIO(data))
    return filename
