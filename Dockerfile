# syntax=docker/dockerfile:1
#   docker build -t mcp-task-gateway .
#   docker run --rm -p 8080:8080 -v gateway-data:/app/data -e GATEWAY_ALLOW_UNAUTHENTICATED=true mcp-task-gateway
# The default configuration (config/gateway.yaml) has no auth and listens on every interface of the container,
# so it starts only when GATEWAY_ALLOW_UNAUTHENTICATED=true says that serving the demo to anyone who reaches
# the port is meant; mount a configuration with auth.tokens or auth.oauth for anything else.
# compose.yaml runs it on Redis as an operator would: docker compose up
# Without Docker, or without a container registry (buildah, and a Node 22 base image made from Debian's mirror
# and the npm registry by scripts/node-base-image.sh; see docs/operations.md):
#   buildah bud --format docker --build-arg NODE_IMAGE="$(scripts/node-base-image.sh)" \
#     --build-arg NPM_REGISTRY="$(npm config get registry)" -t mcp-task-gateway .

# The base image, pinned to an exact release (append @sha256:<digest> to pin the bytes too). Raise it on
# purpose, with the tests, not by whatever the tag points at on build day.
ARG NODE_IMAGE=node:22.23.3-bookworm-slim

# ── build: compile TypeScript (esbuild) and the native SQLite module, then drop the dev dependencies ──────
FROM ${NODE_IMAGE} AS build
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# Where `npm ci` fetches the packages: npm's own default registry unless told (--build-arg NPM_REGISTRY=<url>
# for a mirror). Proxies come in through the standard HTTP_PROXY, HTTPS_PROXY and NO_PROXY build arguments, which
# Docker and buildah pass without a declaration. A registry behind a private CA: give its PEM as the build
# secret npm-ca (--secret id=npm-ca,src=<file>); it is mounted for this step only and never stored in a layer.
# Never pass a token here: build arguments stay in the image's history.
ARG NPM_REGISTRY=
# node-gyp builds native modules (better-sqlite3, when no prebuilt binary can be fetched) against the headers
# that come with Node in /usr/local/include/node, instead of downloading them.
ENV npm_config_nodedir=/usr/local
COPY package.json package-lock.json ./
RUN --mount=type=secret,id=npm-ca \
  if [ -n "$NPM_REGISTRY" ]; then export npm_config_registry="$NPM_REGISTRY"; fi \
  && if [ -s /run/secrets/npm-ca ]; then export npm_config_cafile=/run/secrets/npm-ca; fi \
  && npm ci
COPY tsconfig.json ./
COPY scripts/build.ts ./scripts/
COPY src ./src
RUN npm run build && npm prune --omit=dev

# ── runtime ──────────────────────────────────────────────────────────────────────────────────────────────
FROM ${NODE_IMAGE}
# tini is PID 1: it forwards SIGTERM to the gateway and reaps the processes that stdio upstreams leave behind
# when they exit (npx → npm → node), which Node as PID 1 would leave as zombies.
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
# GATEWAY_PORT is the port config/gateway.yaml listens on, and so the port the health check asks; change it
# by setting it (-e GATEWAY_PORT=9000 -p 9000:9000). GATEWAY_SHUTDOWN_GRACE is server.shutdownGrace
# of config/gateway.yaml: 7s leaves the gateway time to cancel what is left and mark those tasks before
# `docker stop` sends SIGKILL after its default 10s (raise both together: docker stop -t, stop_grace_period).
ENV NODE_ENV=production \
    GATEWAY_HOST=0.0.0.0 \
    GATEWAY_PORT=8080 \
    GATEWAY_SHUTDOWN_GRACE=7s \
    GATEWAY_DATA_DIR=/app/data
WORKDIR /app
# Code and configuration belong to root and are read-only for the gateway; only /app/data is writable.
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY config ./config
# The default configuration: the bundled demo upstream (node dist/demo/main.js, relative to /app) and a SQLite
# store in /app/data. Mount your own file over it.
COPY config/gateway.yaml /etc/mcp-task-gateway/gateway.yaml
RUN mkdir -p /app/data && chown node:node /app/data
# The node user (uid 1000) comes with the base image.
USER node
VOLUME ["/app/data"]
EXPOSE 8080
STOPSIGNAL SIGTERM
# The check reads the configuration file the gateway runs with (the path of CMD: mount yours there, or change
# both) and asks /healthz on its port, over HTTPS when it has server.tls (the listener must present the
# certificate of server.tls.cert). No curl in the slim image: it is Node, from dist/healthcheck.js.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "dist/healthcheck.js", "--config", "/etc/mcp-task-gateway/gateway.yaml"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/main.js", "--config", "/etc/mcp-task-gateway/gateway.yaml"]
