# syntax=docker/dockerfile:1
#   docker build -t mcp-task-gateway .
#   docker run --rm -p 8080:8080 -v gateway-data:/app/data mcp-task-gateway

# ── build: compile TypeScript and the native SQLite module, then drop the dev dependencies ──────────────
FROM node:22-bookworm-slim AS build
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev

# ── runtime ──────────────────────────────────────────────────────────────────────────────────────────────
FROM node:22-bookworm-slim
ENV NODE_ENV=production \
    GATEWAY_HOST=0.0.0.0 \
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
# No curl in the slim image: Node's fetch does the check.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8080/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/main.js", "--config", "/etc/mcp-task-gateway/gateway.yaml"]
