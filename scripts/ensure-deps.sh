# Sourced by start.sh and test.sh: installs npm packages when they are missing or older than the lock file.
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "Installing npm packages (npm ci)..."
  npm ci --no-audit --no-fund --loglevel=error
fi
