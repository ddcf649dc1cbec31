# Herald's image: compiled JavaScript on Node 20, production dependencies only, run as the
# unprivileged `node` user. One image for every process; the command picks it:
#   web:     node dist/src/server.js   (the default)
#   worker:  node dist/src/worker.js
#   sandbox: node packages/sandbox/dist/main.js
#   CLI:     node dist/src/cli.js …

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/sandbox/package.json ./packages/sandbox/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY packages/sandbox/tsconfig.json ./packages/sandbox/
COPY packages/sandbox/src ./packages/sandbox/src
COPY src ./src
COPY queues ./queues
RUN npm run build

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/sandbox/package.json ./packages/sandbox/
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY --from=build /app/packages/sandbox/dist ./packages/sandbox/dist
# The default file archive (HERALD_ARCHIVE_URL=file://./data/archive) must be writable by `node`.
RUN mkdir -p /app/data && chown node:node /app/data
USER node
EXPOSE 3000
# The web's liveness; compose gives the worker and the sandbox checks of their own.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT || 3000}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/src/server.js"]
