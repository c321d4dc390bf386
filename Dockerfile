# One image recipe for every app: docker build --build-arg APP=<app> .
# apps: command-api, outbox-relay, fulfillment, notifier, webhook-receiver, ops (the CLI, e.g. `db:migrate`).

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY . .
# Builds every app into dist/apps/<app>/src/main.js.
RUN npm run build

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force
COPY --from=build /app/dist ./dist
# Declared last so that all layers above are shared by the images of every app.
ARG APP=command-api
ENV APP=${APP}
USER node
# exec: node replaces the shell as PID 1, so it receives SIGTERM and shuts down gracefully.
CMD ["sh", "-c", "exec node dist/apps/$APP/src/main.js"]
