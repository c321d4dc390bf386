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
      testEnvironment: 'node',
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
