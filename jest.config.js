/** Unit specs sit beside the code; end-to-end suites under test/ talk to real PostgreSQL and Kafka. */
const moduleNameMapper = {
  '^@app/([^/]+)$': '<rootDir>/libs/$1/src',
};
const transform = { '^.+\\.ts$': ['ts-jest', {}] };

module.exports = {
  projects: [
    {
      displayName: 'unit',
      rootDir: __dirname,
      roots: ['<rootDir>/apps', '<rootDir>/libs', '<rootDir>/bench', '<rootDir>/test/workload', '<rootDir>/test/support'],
      testRegex: '\\.spec\\.ts$',
      // Node's, naming what a spec leaves running when it ends (the e2e environment does the same).
      testEnvironment: '<rootDir>/test/support/watched-environment.ts',
      moduleNameMapper,
      transform,
    },
    {
      displayName: 'e2e',
      rootDir: __dirname,
      roots: ['<rootDir>/test'],
      testRegex: '\\.e2e-spec\\.ts$',
      // Node's, killing the app processes a test file leaves running when it ends.
      testEnvironment: '<rootDir>/test/support/e2e-environment.ts',
      moduleNameMapper,
      transform,
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      setupFiles: ['<rootDir>/test/support/test-env.ts'],
      setupFilesAfterEnv: ['<rootDir>/test/support/timeouts.ts'],
    },
  ],
};
