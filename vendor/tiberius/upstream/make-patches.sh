#!/usr/bin/env bash
# Writes vendor/tiberius/upstream/NN-*.patch: one patch per upstream-ready change of the vendored
# tiberius, each against the pristine tiberius 0.13.0 from crates.io and applicable on its own.
# They are cut out of the vendored tree, so they cannot drift from what the worker builds.
#   make-patches.sh           regenerate the .patch files
#   make-patches.sh --check   fail if a committed .patch differs from the tree, a change carries
#                             no tag, a file is missing that the package needs, or a patch does
#                             not apply to the pristine crate (CI)
#   make-patches.sh --test    also run the unit tests (`cargo test --lib`, the worker's features)
#                             of the vendored crate and of the pristine crate with each patch
#                             applied alone (slow: builds tiberius eight times)
#
# Every change in the vendored tree starts with a tag line naming what it belongs to:
#   // mssql-pg-operator patch: 03-ascii-nvarchar-decode      (an upstream patch, NN-name)
#   // mssql-pg-operator patch: raw-rows                       (fork only; see PATCHES.md)
# ("#" instead of "//" in Cargo.toml). A tag covers the changed lines around it and those that
# follow within a few unchanged lines, up to the next tag; tag lines are left out of the patches.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
vendored="$(dirname "$here")"
version=0.13.0
sha256=e07324791de2bdaed058af4aa433a0b5ec5c0beac407a9797419c19805df2415

mode=write
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  --test) mode=test ;;
  *) echo "usage: $0 [--check|--test]" >&2; exit 2 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The pristine crate as cargo downloaded it (checked against its crates.io checksum).
crate=$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/tiberius-$version.crate 2>/dev/null | head -n1 || true)
if [ -z "$crate" ]; then
  mkdir -p "$work/fetch/src"
  printf '[package]\nname = "fetch-tiberius"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\ntiberius = { version = "=%s", default-features = false }\n[workspace]\n' \
    "$version" >"$work/fetch/Cargo.toml"
  : >"$work/fetch/src/lib.rs"
  (cd "$work/fetch" && cargo fetch -q)
  crate=$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/tiberius-$version.crate | head -n1)
fi
echo "$sha256  $crate" | sha256sum --check --quiet
tar xzf "$crate" -C "$work"
pristine="$work/tiberius-$version"

out="$here"
if [ $mode != write ]; then out="$work/out"; mkdir -p "$out"; fi

python3 - "$pristine" "$vendored" "$out" <<'PY'
import difflib, os, re, sys

pristine, vendored, out = sys.argv[1:4]

TAG = re.compile(r"^\s*(?://|#)\s*mssql-pg-operator patch:\s*(\S+)\s*$")
# The upstream patches: name -> (subject, body). The body is the commit message upstream.
UPSTREAM = {
    "01-read-packet-memcpy": (
        "Append a received packet's payload with one memcpy",
        "Connection::poll_read appended each packet's payload through `Extend<u8>`,\n"
        "one push per byte; `extend_from_slice` copies it at once. Same bytes.",
    ),
    "02-write-packet-memcpy": (
        "Append an outgoing packet's payload with one memcpy",
        "Packet::encode copied the payload through `Extend<u8>`, byte by byte, on the\n"
        "write path of every RPC and bulk load. Same bytes.",
    ),
    "03-ascii-nvarchar-decode": (
        "Decode all-ASCII nvarchar/nchar/xml values in one pass",
        "Most text is ASCII. When every UTF-16LE code unit of a value is below 0x80 the\n"
        "value is narrowed byte by byte instead of decoded char by char. Same strings;\n"
        "anything else takes the existing decoder. With a test.",
    ),
    "04-bulk-encode-speedups": (
        "Encode bulk-load rows without per-byte copies",
        "- the row buffers' `BufMut::put_slice` is `BytesMut::extend_from_slice`\n"
        "  (every put_u8/put_i32_le/... of a row went through BufMut's default\n"
        "  chunk-by-chunk loop);\n"
        "- nvarchar/nchar values: the UTF-16 length is counted from the UTF-8 bytes\n"
        "  and the limit checked first, then the UTF-16LE is written straight into\n"
        "  the row buffer (ASCII widened eight bytes at a time), with no temporary Vec;\n"
        "- binary values are appended with one memcpy instead of `Extend<u8>`;\n"
        "- Numeric::precision counts digits against a table of powers of ten instead\n"
        "  of one i128 division per digit.\n"
        "The bytes sent are the same for every value. With tests.",
    ),
    "05-max-column-length-limit": (
        "Accept bulk-load values over 65,535 bytes in (max) columns",
        "For varchar(max), nvarchar(max) and varbinary(max) `VarLenContext::len()` is\n"
        "the 0xffff PLP marker, not a size limit, so values of more than 65,535 bytes\n"
        "(32,767 UTF-16 units) were rejected with \"exceed column limit 65535\" although\n"
        "the PLP encoding below the check sends them fine. The limit now applies to the\n"
        "(n) types only. With a test.",
    ),
    "06-read-buffer-room": (
        "Reserve read-buffer room for many packets at a time",
        "While a packet was incomplete PacketCodec::decode reserved a whole packet's\n"
        "length more at every 8 KiB read, so BytesMut moved the packet's buffered part\n"
        "(up to 32 KiB) to the front of its allocation about once per packet. It now\n"
        "reserves only when the room left is short of the rest of the packet plus one\n"
        "read, and then 512 KiB, so the move happens about once per 16 packets.\n"
        "The bytes decoded are the same.",
    ),
    "07-off-against-not-supported": (
        "Negotiate no encryption for Off against a server without TLS",
        "EncryptionLevel::Off means \"encrypt the login packet when the server can\". A\n"
        "server answering NOT_SUP cannot, but (Off, NotSupported) fell through to On and\n"
        "a TLS handshake was started that such a server never answers (a hang until\n"
        "the timeout, or a closed connection). Every other pair negotiates as before.\n"
        "With a test.",
    ),
    "08-utf8-support": (
        "Ask for UTF-8 at login and decode UTF-8 collations",
        "A varchar column with a _UTF8 collation (SQL Server 2019 and later) holds\n"
        "UTF-8. The server sends it as UTF-8 only to a client that sent the LOGIN7\n"
        "feature UTF8_SUPPORT (0x0A); to others it converts the data to the code\n"
        "page of the collation's locale, every other character becoming '?'.\n"
        "tiberius did not ask, and Collation::encoding() ignored the collation's\n"
        "fUTF8 flag. The TDS 7.4 login now sends UTF8_SUPPORT, FEATUREEXTACK accepts\n"
        "its acknowledgement, and a collation with fUTF8 decodes (and bulk-encodes)\n"
        "as UTF-8. With tests.",
    ),
}
FORK = {"raw-rows", "bulk-row-encoder", "ring", "package"}
# Left out of the vendored package: not built here.
DROPPED = (".cargo_vcs_info.json", ".editorconfig", ".envrc", ".github/", ".gitignore", ".gitleaks.toml",
           "CHANGELOG.md", "Cargo.lock", "Cargo.toml.orig", "README.md", "deny.toml", "docker-compose.yml",
           "docker/", "docs/", "examples/", "flake.lock", "flake.nix", "rust-toolchain", "tests/")
OURS = ("PATCHES.md", "upstream/")
# Unchanged lines a tag reaches across to the next changed lines.
REACH = 12

errors = []


def files(root, skip):
    found = set()
    for d, dirs, names in os.walk(root):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), root)
            if not rel.startswith(skip):
                found.add(rel)
    return found


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines(keepends=True)


def tagged_regions(rel, a, b):
    """The changed regions of b against a, each with the tag it belongs to."""
    regions = []
    tag, tag_end = None, None
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        tags = {m.group(1) for m in (TAG.match(line) for line in b[j1:j2]) if m}
        if len(tags) > 1:
            errors.append(f"{rel}:{j1 + 1}: one change carries several tags {sorted(tags)}; "
                          "separate them by an unchanged line")
            continue
        if tags:
            tag = tags.pop()
        elif tag is None or j1 - tag_end > REACH:
            errors.append(f"{rel}:{j1 + 1}: a change without a tag (mssql-pg-operator patch: NAME)")
            continue
        if tag not in UPSTREAM and tag not in FORK:
            errors.append(f"{rel}:{j1 + 1}: unknown tag {tag}")
        tag_end = j2
        new = [line for line in b[j1:j2] if not TAG.match(line)]
        regions.append((tag, i1, i2, new))
    return regions


def with_only(a, regions, name):
    result, at = [], 0
    for tag, i1, i2, new in regions:
        if tag != name:
            continue
        result += a[at:i1] + new
        at = i2
    return result + a[at:]


patches = {name: [] for name in UPSTREAM}
p_files = files(pristine, ())
v_files = files(vendored, OURS)
for rel in sorted(p_files - v_files):
    if not rel.startswith(DROPPED):
        errors.append(f"{rel}: missing from the vendored crate (only {DROPPED} may be)")
for rel in sorted(v_files):
    b = read(os.path.join(vendored, rel))
    if rel in p_files:
        a = read(os.path.join(pristine, rel))
        if a == b:
            continue
        regions = tagged_regions(rel, a, b)
    else:
        head = [TAG.match(line) for line in b[:10]]
        tags = [m.group(1) for m in head if m]
        if not tags:
            errors.append(f"{rel}: a new file without a tag in its first lines")
            continue
        a, regions = [], [(tags[0], 0, 0, [line for line in b if not TAG.match(line)])]
    for name in UPSTREAM:
        mine = with_only(a, regions, name)
        if mine == a:
            continue
        diff = list(difflib.unified_diff(a, mine, "a/" + rel if a else "/dev/null", "b/" + rel, n=3))
        header = f"diff --git a/{rel} b/{rel}\n" + ("" if a else "new file mode 100644\n")
        body = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                       for line in diff)
        for line in diff:
            if line.startswith("+") and "mssql-pg-operator" in line:
                errors.append(f"{rel}: {name} would carry this project's name upstream: {line.strip()}")
        patches[name].append(header + body)

if errors:
    sys.exit("make-patches.sh:\n  " + "\n  ".join(errors))
for name, (subject, body) in UPSTREAM.items():
    if not patches[name]:
        sys.exit(f"make-patches.sh: no change carries the tag {name}")
    with open(os.path.join(out, name + ".patch"), "w", encoding="utf-8") as f:
        f.write(f"Subject: [PATCH] {subject}\n\n{body}\n\n---\n")
        f.write("".join(patches[name]))
PY

# Each patch applies on its own to the pristine crate.
for p in "$out"/[0-9][0-9]-*.patch; do
  (cd "$pristine" && git apply --check "$p") || { echo "make-patches.sh: $(basename "$p") does not apply to tiberius $version" >&2; exit 1; }
done

if [ $mode = check ]; then
  if ! diff -r -x make-patches.sh -x '*.md' -x '*.rs' "$here" "$out" >"$work/drift"; then
    cat "$work/drift" >&2
    echo "make-patches.sh: vendor/tiberius/upstream/*.patch differ from the vendored tree; run vendor/tiberius/upstream/make-patches.sh" >&2
    exit 1
  fi
fi

if [ $mode = test ]; then
  # The unit tests need only these of the crate's dev-dependencies (the rest serve its
  # integration tests and examples, which are not vendored).
  unit_tests() {
    python3 - "$1/Cargo.toml" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path, encoding="utf-8").read()
keep = {"tokio", "tokio-util", "chrono", "uuid"}
def cut(m):
    return m.group(0) if m.group(1) in keep else ""
text = re.sub(r"\[dev-dependencies\.([A-Za-z0-9_-]+)\]\n(?:[^\[\n].*\n|\n)*", cut, text)
open(path, "w", encoding="utf-8").write(text)
PY
    (cd "$1" && cargo test -q --lib --no-default-features \
      --features tds73,tds80,rustls,chrono,rust_decimal 2>&1 | grep -E "^test result|FAILED|panicked|^error|^  " ; exit "${PIPESTATUS[0]}")
  }
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$work/target}"
  failed=()
  cp -r "$vendored" "$work/vendored"
  rm -rf "$work/vendored/upstream"
  cp "$pristine/Cargo.lock" "$work/vendored/"
  cp -r "$pristine/docker" "$work/vendored/"   # certificates the TLS unit tests read
  echo "== the vendored crate"
  unit_tests "$work/vendored" || failed+=(vendored)
  for p in "$here"/[0-9][0-9]-*.patch; do
    name=$(basename "$p" .patch)
    rm -rf "$work/$name"
    cp -r "$pristine" "$work/$name"
    (cd "$work/$name" && git apply "$p")
    echo "== tiberius $version + $name"
    unit_tests "$work/$name" || failed+=("$name")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "make-patches.sh: unit tests failed: ${failed[*]}" >&2
    exit 1
  fi
fi
