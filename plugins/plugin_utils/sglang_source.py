# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the controller reads the pinned sglang's core metadata from, before
any host is changed (the sglang role's preflight, action sglang_requirements).

- The wheelhouse (sglang_wheelhouse, a controller folder): its
  sglang-<version>-*.whl, read in place.
- Else the controller's cache (sglang_wheel_cache_dir), one folder per
  sha256, filled once from the indexes the install uses: a file is kept
  only after its sha256 was checked, so a second run reads the cache and
  asks no index.
- Else the indexes (sglang_index_urls, then sglang_default_index_url),
  through the simple API (PEP 691 JSON, or the PEP 503 HTML page of a
  mirror or a plain folder served over HTTP). The file read is the wheel
  whose sha256 is pinned (sglang_wheel_sha256, else the collection's pin of
  that release, sglang_pins.SGLANG_WHEELS); for a release without a pin,
  the METADATA the index serves beside its preferred wheel (PEP 658),
  checked against the index's hash, else that wheel, checked the same way.

Index credentials (https://user:token@host/...) go into an Authorization
header; no message shows them. sglang_pins reads the metadata and judges the
pins; this module only finds, fetches and caches.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import glob
import json
import os
import re
import shutil
import tempfile
from html.parser import HTMLParser
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit
from urllib.request import url2pathname

from ansible.module_utils.urls import ConnectionError as UrlConnectionError, open_url

from ansible_collections.gpufleet.inference.plugins.module_utils.flashinfer_aot import sha256_file
from ansible_collections.gpufleet.inference.plugins.plugin_utils import sglang_pins
# PEP 440 through sglang_pins, which imports packaging guarded (ansible-test's import check runs without it)
from ansible_collections.gpufleet.inference.plugins.plugin_utils.sglang_pins import (
    InvalidVersion, Version, canonicalize_name)

PROJECT = "sglang"
# The hosts' Pythons, most wanted first: the metadata is one per release, the
# file read is the one a host of the default Python installs.
PREFERRED_PYTHON_TAGS = ("cp312", "cp311", "cp313")
ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
TIMEOUT = 600
# extra == "name" in a requirement's marker, as wheels write it
_EXTRA_MARKER_RE = re.compile(r"""\bextra\s*==\s*['"]([^'"]+)['"]""")


class SourceError(ValueError):
    """The metadata cannot be had; the message says where it was looked for and what to set."""


# ---------------------------------------------------------------- file names


def release_wheel(filename, version):
    """Whether FILENAME is a wheel of sglang VERSION (PEP 440 equal) a Linux x86_64 host can install."""
    try:
        name, found = sglang_pins.wheel_name_version(filename)
        if canonicalize_name(name) != PROJECT or Version(found) != Version(version):
            return False
    except (ValueError, InvalidVersion):
        return False
    platform = os.path.basename(filename)[:-len(".whl")].split("-")[-1]
    return platform == "any" or ("x86_64" in platform and platform.startswith(("manylinux", "linux")))


def preference(filename):
    """Sort key: the preferred Python tag first, then the name (a stable choice)."""
    tag = os.path.basename(filename).split("-")[-3] if filename.count("-") >= 4 else ""
    rank = PREFERRED_PYTHON_TAGS.index(tag) if tag in PREFERRED_PYTHON_TAGS else len(PREFERRED_PYTHON_TAGS)
    return rank, os.path.basename(filename)


def pinned_sha256(version, sha256=""):
    """The sha256 the wheel read must have: SHA256 where given, else the collection's pin of
    that release, else None (the index's own hash is checked then)."""
    if sha256:
        return sha256.lower()
    pinned = sglang_pins.SGLANG_WHEELS.get(str(version))
    return pinned["sha256"] if pinned else None


# ---------------------------------------------------------------- wheelhouse and cache


def wheelhouse_wheel(folder, version):
    """The wheelhouse's wheel of that release (the preferred one where there are several)."""
    found = sorted((path for path in glob.glob(os.path.join(glob.escape(folder), "*.whl"))
                    if release_wheel(os.path.basename(path), version)), key=preference)
    if not found:
        raise SourceError("sglang_wheelhouse %s holds no wheel of sglang %s for Linux x86_64 (sglang-%s-*.whl): "
                          "add it (make wheelhouse), or set sglang_version to a release it holds"
                          % (folder, version, version))
    return found[0]


def cached(cache_dir, version, sha256=None):
    """A file of that release in the cache: the wheel of SHA256 where one is pinned, else any
    wheel or index METADATA of the release kept there; None when there is none."""
    if sha256:
        found = glob.glob(os.path.join(glob.escape(os.path.join(cache_dir, sha256)), "*.whl"))
        return found[0] if found else None
    found = [path for path in glob.glob(os.path.join(glob.escape(cache_dir), "*", "*"))
             if release_wheel(os.path.basename(path)[:-len(".metadata")] if path.endswith(".whl.metadata")
                              else os.path.basename(path), version)
             and path.endswith((".whl", ".whl.metadata"))]
    return sorted(found, key=preference)[0] if found else None


@contextlib.contextmanager
def cache_lock(cache_dir):
    """Hosts check in parallel (one worker each): one fills the cache, the others wait and read it."""
    os.makedirs(cache_dir, exist_ok=True)
    with open(os.path.join(cache_dir, ".lock"), "w", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def keep(cache_dir, sha256, filename, data_path):
    """Move a checked file into the cache's folder of its sha256; its path there."""
    folder = os.path.join(cache_dir, sha256)
    os.makedirs(folder, exist_ok=True)
    dest = os.path.join(folder, filename)
    os.replace(data_path, dest)
    return dest


# ---------------------------------------------------------------- the simple API


def split_credentials(url):
    """(URL without user:password@, {Authorization header} or {}): credentials never travel in a
    URL that a message could show."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, {}
    userinfo, host = parts.netloc.rsplit("@", 1)
    login, dummy, password = userinfo.partition(":")
    token = base64.b64encode(("%s:%s" % (unquote(login), unquote(password))).encode("utf-8")).decode("ascii")
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)), {
        "Authorization": "Basic " + token}


class _Links(HTMLParser):
    """The <a> elements of a PEP 503 page, as PEP 691 file entries."""

    def __init__(self, page_url):
        super().__init__()
        self.page_url = page_url
        self.files = []

    def handle_starttag(self, tag, attrs):
        if tag != "a":
            return
        attrs = dict(attrs)
        href = attrs.get("href")
        if not href:
            return
        url, dummy, fragment = urljoin(self.page_url, href).partition("#")
        algorithm, dummy, digest = fragment.partition("=")
        entry = {
            "filename": unquote(os.path.basename(urlsplit(url).path)),
            "url": url,
            "hashes": {algorithm: digest} if digest else {},
        }
        if attrs.get("data-requires-python"):
            entry["requires-python"] = attrs["data-requires-python"]
        metadata = attrs.get("data-core-metadata") or attrs.get("data-dist-info-metadata")
        if metadata:
            algorithm, dummy, digest = metadata.partition("=")
            entry["core-metadata"] = {algorithm: digest} if digest else True
        self.files.append(entry)


def parse_project_page(text, content_type, page_url):
    """The file entries (PEP 691 form: filename, url, hashes, requires-python, core-metadata) of a
    project page, JSON or HTML; relative URLs are made absolute."""
    if "json" in (content_type or ""):
        files = []
        for entry in json.loads(text).get("files") or []:
            entry = dict(entry)
            entry["url"] = urljoin(page_url, entry["url"])
            if "core-metadata" not in entry and entry.get("data-dist-info-metadata"):
                entry["core-metadata"] = entry["data-dist-info-metadata"]
            files.append(entry)
        return files
    parser = _Links(page_url)
    parser.feed(text)
    return parser.files


def _open(url, headers, timeout):
    """A response for URL; file:// folders give their index.html, as a static PEP 503 tree has it."""
    if url.startswith("file://"):
        path = url2pathname(urlsplit(url).path)
        if os.path.isdir(path):
            url = "file://" + os.path.join(path, "index.html")
    return open_url(url, headers=headers, timeout=timeout)


def project_files(index_url, timeout=TIMEOUT):
    """The file entries of sglang's page at one index (its URL without credentials is the label)."""
    bare, headers = split_credentials(index_url)
    page = bare.rstrip("/") + "/%s/" % PROJECT
    with _open(page, dict(headers, Accept=ACCEPT), timeout) as response:
        content_type = response.headers.get("Content-Type", "") if response.headers else ""
        text = response.read().decode("utf-8")
    return parse_project_page(text, content_type, page), headers


def choose(files, version, sha256=None):
    """The entry to read: the wheel whose index hash is SHA256 where one is pinned (or, where the
    index gives no hashes, the collection's pinned file name); else the preferred wheel."""
    wheels = sorted((entry for entry in files if release_wheel(entry.get("filename", ""), version)),
                    key=lambda entry: preference(entry["filename"]))
    if not wheels:
        return None
    if not sha256:
        return wheels[0]
    pinned = sglang_pins.SGLANG_WHEELS.get(str(version)) or {}
    for entry in wheels:
        digest = (entry.get("hashes") or {}).get("sha256")
        if (digest or "").lower() == sha256 or (not digest and entry["filename"] == pinned.get("filename")):
            return entry
    return None


def download(url, headers, dest, timeout=TIMEOUT):
    """URL's bytes into DEST (written whole, then renamed into place)."""
    with _open(url, headers, timeout) as response, open(dest + ".part", "wb") as handle:
        shutil.copyfileobj(response, handle, 1 << 20)
    os.replace(dest + ".part", dest)


def fetch(cache_dir, version, index_urls, sha256=None, timeout=TIMEOUT):
    """Find the release at the first index that has it, fetch what is read into the cache after
    checking its sha256, and return its path there."""
    looked = []
    for index_url in index_urls:
        label = split_credentials(index_url)[0]
        try:
            files, headers = project_files(index_url, timeout)
        except (OSError, ValueError, UrlConnectionError) as exc:
            looked.append("%s (%s)" % (label, exc))
            continue
        entry = choose(files, version, sha256)
        if entry is None:
            looked.append("%s (%s)" % (label, "no wheel of sglang %s%s for Linux x86_64" % (
                version, " with sha256 %s" % sha256 if sha256 else "")))
            continue
        return _fetch_entry(cache_dir, entry, headers, sha256, timeout)
    raise SourceError("sglang %s: no index had it: %s. Set sglang_version to a release the indexes serve%s, or give "
                      "sglang_wheelhouse" % (version, "; ".join(looked) or "no index URL",
                                             " and sglang_wheel_sha256 to its wheel's sha256" if sha256 else ""))


def _fetch_entry(cache_dir, entry, headers, sha256, timeout):
    work = tempfile.mkdtemp(prefix="download-", dir=cache_dir)
    try:
        declared = entry.get("core-metadata")
        if not sha256 and isinstance(declared, dict) and declared.get("sha256"):
            # PEP 658: the METADATA alone, checked against the index's hash by the reader
            path = os.path.join(work, entry["filename"] + ".metadata")
            download(entry["url"] + ".metadata", headers, path, timeout)
            with open(path, encoding="utf-8") as handle:
                sglang_pins.metadata_from_simple_entry(entry, handle.read())
            return keep(cache_dir, declared["sha256"].lower(), entry["filename"] + ".metadata", path)
        want = sha256 or ((entry.get("hashes") or {}).get("sha256") or "").lower()
        if not want:
            raise SourceError("%s: the index gives no sha256 to check it against: set sglang_wheel_sha256"
                              % entry["filename"])
        path = os.path.join(work, entry["filename"])
        download(entry["url"], headers, path, timeout)
        found = sha256_file(path)
        if found != want:
            raise SourceError("%s: sha256 %s, expected %s (%s): the index serves another file"
                              % (entry["filename"], found, want,
                                 "sglang_wheel_sha256 or the collection's pin" if sha256 else "the index's hash"))
        return keep(cache_dir, want, entry["filename"], path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------- the metadata


def read(path):
    """sglang_pins' metadata of a wheel (its METADATA) or of an index's .metadata file."""
    if path.endswith(".whl"):
        return sglang_pins.read_wheel_metadata(path)
    with open(path, encoding="utf-8") as handle:
        metadata = sglang_pins.parse_metadata(handle.read(), os.path.basename(path))
    name, version = sglang_pins.wheel_name_version(os.path.basename(path)[:-len(".metadata")])
    if canonicalize_name(metadata["name"]) != canonicalize_name(name) or Version(metadata["version"]) != Version(version):
        raise SourceError("%s says %s %s" % (path, metadata["name"], metadata["version"]))
    return metadata


def locate(version, wheelhouse="", index_urls=(), cache_dir="", sha256="", timeout=TIMEOUT):
    """{'path', 'source'}: the file the release's metadata is read from, and where it came from
    (wheelhouse, cache or the index's URL without credentials)."""
    if wheelhouse:
        path = wheelhouse_wheel(wheelhouse, version)
        if sha256 and sha256_file(path) != sha256.lower():
            raise SourceError("%s: sha256 %s, sglang_wheel_sha256 is %s" % (path, sha256_file(path), sha256.lower()))
        return {"path": path, "source": "wheelhouse"}
    want = pinned_sha256(version, sha256)
    path = cached(cache_dir, version, want)
    if path:
        return {"path": path, "source": "cache"}
    with cache_lock(cache_dir):
        # another host's worker may have fetched it while this one waited
        path = cached(cache_dir, version, want)
        if path:
            return {"path": path, "source": "cache"}
        return {"path": fetch(cache_dir, version, list(index_urls), want, timeout), "source": "index"}


def declared_extras(metadata):
    """The extras the release's requirements name (PEP 685 form), read from their markers."""
    extras = set()
    for line in metadata.get("requires_dist") or ():
        extras.update(canonicalize_name(name) for name in _EXTRA_MARKER_RE.findall(line.partition(";")[2]))
    return extras
