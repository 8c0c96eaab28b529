import { test as base } from 'vitest';
import { GenericContainer, Wait } from 'testcontainers';

export const test = base.extend({
  server: [
    async ({}, use) => {
      const image = await GenericContainer.fromDockerfile('.', 'Dockerfile').build();
      const container = await image
        .withExposedPorts(3000)
        .withWaitStrategy(Wait.forHttp('/', 3000))
        .start();
      await use({ url: `http://${container.getHost()}:${container.getMappedPort(3000)}` });
      await container.stop();
    },
    { scope: 'worker' },
  ],
});
