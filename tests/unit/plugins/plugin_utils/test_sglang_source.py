"""plugin_utils.sglang_source: where the controller reads the pinned sglang's
metadata from - the wheelhouse, its cache, or an index's simple API (PEP 691
JSON, PEP 503 HTML, a file:// tree) - and that nothing reaches the cache
before its sha256 was checked.

The indexes are a local HTTP server on 127.0.0.1 serving wheels made of the
hand-written fixture METADATA (tests/fixtures/sglang_pins)."""
import base64
import hashlib
import http.server
import json
import os
import threading

import pytest

from ansible_collections.gpufleet.inference.plugins.plugin_utils import sglang_pins, sglang_source
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.test_sglang_pins import (
    fixture_text, make_wheel)

CP312 = "sglang-%s-cp312-cp312-manylinux_2_34_x86_64.whl"
CP311 = "sglang-%s-cp311-cp311-manylinux_2_34_x86_64.whl"


def sha256(data):
    return hashlib.sha256(data).hexdigest()


class Index(object):
    """An index on 127.0.0.1: {path: (content type, bytes)}, and the requests it answered."""

    def __init__(self):
        self.pages = {}
        self.requests = []
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib's name
                index.requests.append((self.path, dict(self.headers)))
                if index.auth and self.headers.get("Authorization") != index.auth:
                    self.send_response(401)
                    self.end_headers()
                    return
                kind, body = index.pages.get(self.path, (None, None))
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.auth = None
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/simple" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add_file(self, name, data):
        self.pages["/files/" + name] = ("application/octet-stream", data)

    def json_page(self, entries):
        self.pages["/simple/sglang/"] = ("application/vnd.pypi.simple.v1+json", json.dumps(
            {"meta": {"api-version": "1.1"}, "name": "sglang", "files": entries}).encode())

    def html_page(self, anchors):
        self.pages["/simple/sglang/"] = ("text/html", ("<html><body>%s</body></html>" % "".join(anchors)).encode())

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(name="index")
def index_fixture():
    index = Index()
    yield index
    index.close()


def wheel_bytes(tmp_path, version, filename=None):
    # the file name in the METADATA's summary: two wheels of one release are two files
    text = fixture_text("sglang-%s.METADATA" % version).replace("\nSummary: ", "\nSummary: %s " % filename, 1)
    path = make_wheel(tmp_path, version, filename=filename, metadata=text)
    with open(path, "rb") as handle:
        return handle.read()


@pytest.fixture(name="no_pins")
def no_pins_fixture(monkeypatch):
    """No release pinned in the collection: the index's hashes are what is checked."""
    monkeypatch.setattr(sglang_pins, "SGLANG_WHEELS", {})


def test_the_wheelhouse_gives_its_preferred_wheel(tmp_path):
    make_wheel(tmp_path, "0.5.23", filename=CP311 % "0.5.23")
    make_wheel(tmp_path, "0.5.23")
    make_wheel(tmp_path, "0.5.9")
    found = sglang_source.locate("0.5.23", wheelhouse=str(tmp_path), cache_dir=str(tmp_path / "cache"))
    assert found == {"path": str(tmp_path / (CP312 % "0.5.23")), "source": "wheelhouse"}
    assert sglang_source.read(found["path"])["version"] == "0.5.23"
    # nothing was fetched, nothing cached
    assert not os.path.exists(str(tmp_path / "cache"))


def test_a_wheelhouse_without_the_release_names_it(tmp_path):
    make_wheel(tmp_path, "0.5.9")
    with pytest.raises(sglang_source.SourceError, match="sglang_wheelhouse %s holds no wheel of sglang 0.5.23 "
                       % tmp_path):
        sglang_source.locate("0.5.23", wheelhouse=str(tmp_path), cache_dir=str(tmp_path / "cache"))


def test_a_wheelhouse_wheel_is_checked_against_a_given_sha256(tmp_path):
    make_wheel(tmp_path, "0.5.23")
    with pytest.raises(sglang_source.SourceError, match="sglang_wheel_sha256 is " + "0" * 64):
        sglang_source.locate("0.5.23", wheelhouse=str(tmp_path), cache_dir=str(tmp_path / "cache"), sha256="0" * 64)


def test_pep_691_json_with_metadata_fetches_the_metadata_alone_once(tmp_path, index, no_pins):
    data = wheel_bytes(tmp_path, "0.5.9", CP312 % "0.5.9")
    metadata = fixture_text("sglang-0.5.9.METADATA").encode()
    index.add_file(CP312 % "0.5.9", data)
    index.add_file(CP312 % "0.5.9" + ".metadata", metadata)
    index.add_file(CP311 % "0.5.9", data)
    index.json_page([
        {"filename": CP311 % "0.5.9", "url": "../../files/" + CP311 % "0.5.9", "hashes": {"sha256": sha256(data)}},
        {"filename": CP312 % "0.5.9", "url": "../../files/" + CP312 % "0.5.9", "hashes": {"sha256": sha256(data)},
         "core-metadata": {"sha256": sha256(metadata)}, "requires-python": ">=3.10"},
        {"filename": "sglang-0.5.9.tar.gz", "url": "../../files/sglang-0.5.9.tar.gz", "hashes": {}},
    ])
    cache = str(tmp_path / "cache")
    found = sglang_source.locate("0.5.9", index_urls=[index.url], cache_dir=cache)
    assert found == {"path": os.path.join(cache, sha256(metadata), CP312 % "0.5.9" + ".metadata"), "source": "index"}
    assert [path for path, headers in index.requests] == ["/simple/sglang/", "/files/%s.metadata" % (CP312 % "0.5.9")]
    assert "application/vnd.pypi.simple.v1+json" in index.requests[0][1]["Accept"]
    meta = sglang_source.read(found["path"])
    assert (meta["version"], meta["requires_python"]) == ("0.5.9", ">=3.10")
    # the second read is the cache's: the index is not asked again
    index.close()
    assert sglang_source.locate("0.5.9", index_urls=[index.url], cache_dir=cache) == dict(found, source="cache")
    assert sorted(os.listdir(cache)) == [".lock", sha256(metadata)]


def test_pep_503_html_without_metadata_fetches_the_wheel_checked_against_its_hash(tmp_path, index, no_pins):
    data = wheel_bytes(tmp_path, "0.5.9", CP312 % "0.5.9")
    index.add_file(CP312 % "0.5.9", data)
    index.html_page(['<a href="/files/%s#sha256=%s" data-requires-python="&gt;=3.10">x</a>'
                     % (CP312 % "0.5.9", sha256(data))])
    cache = str(tmp_path / "cache")
    found = sglang_source.locate("0.5.9", index_urls=[index.url], cache_dir=cache)
    assert found["path"] == os.path.join(cache, sha256(data), CP312 % "0.5.9")
    assert sglang_source.read(found["path"])["requires_dist"][0] == "sgl-kernel==0.3.21"


def test_a_file_that_is_not_the_one_the_index_hashes_is_not_kept(tmp_path, index, no_pins):
    index.add_file(CP312 % "0.5.9", wheel_bytes(tmp_path, "0.5.9", CP312 % "0.5.9"))
    index.html_page(['<a href="/files/%s#sha256=%s">x</a>' % (CP312 % "0.5.9", "1" * 64)])
    cache = str(tmp_path / "cache")
    with pytest.raises(sglang_source.SourceError, match="the index serves another file"):
        sglang_source.locate("0.5.9", index_urls=[index.url], cache_dir=cache)
    assert os.listdir(cache) == [".lock"]


def test_a_pinned_release_reads_its_pinned_wheel_and_no_other(tmp_path, index, monkeypatch):
    pinned = wheel_bytes(tmp_path, "0.5.23")
    other = wheel_bytes(tmp_path, "0.5.23", CP311 % "0.5.23")
    monkeypatch.setattr(sglang_pins, "SGLANG_WHEELS", {"0.5.23": {"filename": CP312 % "0.5.23",
                                                                  "sha256": sha256(pinned)}})
    index.add_file(CP312 % "0.5.23", pinned)
    index.add_file(CP311 % "0.5.23", other)
    metadata = fixture_text("sglang-0.5.23.METADATA").encode()
    index.add_file(CP312 % "0.5.23" + ".metadata", metadata)
    entries = [{"filename": name, "url": "/files/" + name, "hashes": {"sha256": sha256(body)},
                "core-metadata": {"sha256": sha256(metadata)}}
               for name, body in ((CP311 % "0.5.23", other), (CP312 % "0.5.23", pinned))]
    index.json_page(entries)
    cache = str(tmp_path / "cache")
    found = sglang_source.locate("0.5.23", index_urls=[index.url], cache_dir=cache)
    # the wheel whose sha256 is pinned, not the METADATA beside it (whose hash the pin does not cover)
    assert found["path"] == os.path.join(cache, sha256(pinned), CP312 % "0.5.23")
    # sglang_wheel_sha256 wins over the collection's pin
    with pytest.raises(sglang_source.SourceError, match="no wheel of sglang 0.5.23 with sha256 %s" % ("2" * 64)):
        sglang_source.locate("0.5.23", index_urls=[index.url], cache_dir=cache, sha256="2" * 64)
    assert sglang_source.locate("0.5.23", index_urls=[index.url], cache_dir=cache,
                                sha256=sha256(other))["path"] == os.path.join(cache, sha256(other), CP311 % "0.5.23")


def test_index_credentials_go_in_a_header_and_no_message_shows_them(tmp_path, index, no_pins):
    data = wheel_bytes(tmp_path, "0.5.9", CP312 % "0.5.9")
    index.add_file(CP312 % "0.5.9", data)
    index.html_page(['<a href="/files/%s#sha256=%s">x</a>' % (CP312 % "0.5.9", sha256(data))])
    index.auth = "Basic " + base64.b64encode(b"deploy:s3cr@t").decode()
    with_credentials = index.url.replace("http://", "http://deploy:s3cr%40t@")
    found = sglang_source.locate("0.5.9", index_urls=[with_credentials], cache_dir=str(tmp_path / "cache"))
    assert found["source"] == "index"
    index.auth = "Basic other"
    with pytest.raises(sglang_source.SourceError) as failed:
        sglang_source.locate("0.5.9", index_urls=[with_credentials], cache_dir=str(tmp_path / "cache2"))
    assert "s3cr" not in str(failed.value) and index.url in str(failed.value) and "401" in str(failed.value)


def test_the_first_index_that_has_it_is_used_and_each_miss_is_said(tmp_path, index, no_pins):
    data = wheel_bytes(tmp_path, "0.5.9", CP312 % "0.5.9")
    index.add_file(CP312 % "0.5.9", data)
    index.html_page(['<a href="/files/%s#sha256=%s">x</a>' % (CP312 % "0.5.9", sha256(data))])
    empty = tmp_path / "empty" / "sglang"
    empty.mkdir(parents=True)
    (empty / "index.html").write_text("<html></html>")
    missing = "file://%s" % (tmp_path / "empty")
    assert sglang_source.locate("0.5.9", index_urls=[missing, index.url],
                                cache_dir=str(tmp_path / "cache"))["source"] == "index"
    with pytest.raises(sglang_source.SourceError, match="sglang 0.5.23: no index had it: %s \\(no wheel of sglang "
                       "0.5.23 for Linux x86_64\\); %s" % (missing, index.url)):
        sglang_source.locate("0.5.23", index_urls=[missing, index.url], cache_dir=str(tmp_path / "cache"))


def test_a_file_index_tree_is_read_like_a_served_one(tmp_path, no_pins):
    data = wheel_bytes(tmp_path, "0.5.9", CP312 % "0.5.9")
    tree = tmp_path / "tree"
    (tree / "sglang").mkdir(parents=True)
    (tree / "files").mkdir()
    (tree / "files" / (CP312 % "0.5.9")).write_bytes(data)
    (tree / "sglang" / "index.html").write_text('<a href="../files/%s#sha256=%s">x</a>' % (CP312 % "0.5.9", sha256(data)))
    found = sglang_source.locate("0.5.9", index_urls=["file://%s" % tree], cache_dir=str(tmp_path / "cache"))
    assert found["path"].endswith(CP312 % "0.5.9") and found["source"] == "index"


@pytest.mark.parametrize("filename, wanted", [
    (CP312 % "0.5.23", True),
    ("sglang-0.5.23-py3-none-any.whl", True),
    ("sglang-0.5.23.0-cp311-cp311-manylinux_2_28_x86_64.whl", True),  # PEP 440 equal
    ("sglang-0.5.23-cp312-cp312-manylinux_2_34_aarch64.whl", False),
    ("sglang-0.5.23-cp312-cp312-macosx_14_0_arm64.whl", False),
    ("sglang-0.5.23.post1-cp312-cp312-manylinux_2_34_x86_64.whl", False),
    ("sglang_kernel-0.5.23-cp310-abi3-manylinux2014_x86_64.whl", False),
    ("sglang-0.5.23.tar.gz", False),
])
def test_which_files_are_the_release_for_the_hosts(filename, wanted):
    assert sglang_source.release_wheel(filename, "0.5.23") is wanted


def test_the_declared_extras_are_read_from_the_markers():
    meta = sglang_pins.parse_metadata(fixture_text("sglang-0.5.23.METADATA"))
    assert sglang_source.declared_extras(meta) == {"test", "dev"}
    assert sglang_source.declared_extras(dict(meta, requires_dist=["x; extra == 'Http_2' and python_version > '3'"])) \
        == {"http-2"}


def test_credentials_are_split_from_the_url():
    assert sglang_source.split_credentials("https://pypi.org/simple") == ("https://pypi.org/simple", {})
    url, headers = sglang_source.split_credentials("https://me:t%2Bk@mirror.example/simple")
    assert url == "https://mirror.example/simple"
    assert base64.b64decode(headers["Authorization"].split()[1]) == b"me:t+k"
