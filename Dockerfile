# Herald's images: compiled JavaScript on Node 20, production dependencies only, run as the
# unprivileged `node` user.
#
# The last stage, the default target, is Herald: one image for every process, the command picks it:
#   web:     node dist/src/server.js   (the default)
#   worker:  node dist/src/worker.js
#   CLI:     node dist/src/cli.js …
# It holds no emulator: the sandbox workspace (packages/sandbox) is neither installed nor copied,
# so its processes reach live providers, or the emulators by URL. The client workspace's build
# (packages/client, no dependencies) is, for `herald send`.
#
# The `sandbox` target is the emulators' image (compose's `sandbox` service):
#   node packages/sandbox/dist/main.js   (PORT 4010, HOST 0.0.0.0)

FROM node:24-bookworm-slim AS build
WORKDIR /app
# The workspaces' manifests come first, so that `npm ci` installs their dependencies and links them.
COPY package.json package-lock.json ./
COPY packages/sandbox/package.json ./packages/sandbox/
COPY packages/client/package.json ./packages/client/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY packages/sandbox/tsconfig.json ./packages/sandbox/
COPY packages/sandbox/src ./packages/sandbox/src
COPY packages/client/tsconfig.json ./packages/client/
COPY packages/client/src ./packages/client/src
COPY src ./src
COPY queues ./queues
# Builds the sandbox and client workspaces, then Herald (dist/, which holds nothing of the sandbox).
RUN npm run build

FROM node:24-bookworm-slim AS sandbox
ENV NODE_ENV=production PORT=4010 HOST=0.0.0.0
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/sandbox/package.json ./packages/sandbox/
# The sandbox workspace's production dependencies alone, none of Herald's.
RUN npm ci --omit=dev --workspace=@herald/sandbox --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/packages/sandbox/dist ./packages/sandbox/dist
USER node
EXPOSE 4010
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/__sandbox/sms`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "packages/sandbox/dist/main.js"]

FROM node:24-bookworm-slim AS herald
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# Herald's production dependencies without the workspaces: the sandbox package is not linked, and
# a dependency only it has is not installed.
RUN npm ci --omit=dev --workspaces=false --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# The typed client (no dependencies of its own), for `herald send`: where npm would install it.
COPY --from=build /app/packages/client/package.json ./node_modules/@herald/client/package.json
COPY --from=build /app/packages/client/dist ./node_modules/@herald/client/dist
# The default file archive (HERALD_ARCHIVE_URL=file://./data/archive) must be writable by `node`.
RUN mkdir -p /app/data && chown node:node /app/data
USER node
EXPOSE 3000
# The web's liveness; compose gives the worker and the sandbox checks of their own.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT || 3000}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/src/server.js"]
