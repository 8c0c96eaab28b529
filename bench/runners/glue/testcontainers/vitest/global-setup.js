import { GenericContainer, Wait } from 'testcontainers';

export default async function setup({ provide }) {
  const image = await GenericContainer.fromDockerfile('.', 'Dockerfile').build();
  const container = await image
    .withExposedPorts(3000)
    .withWaitStrategy(Wait.forHttp('/', 3000))
    .start();
  provide('server', { url: `http://${container.getHost()}:${container.getMappedPort(3000)}` });
  return () => container.stop();
}
