// deploy/kubernetes/ as an operator applies it (`kubectl apply -k deploy/kubernetes/`): every manifest is valid
// against the Kubernetes API schemas (kubernetes-models, offline), the gateway's configuration in the ConfigMap
// loads with the environment the Deployment gives it, and the probes, ports, grace periods, disruption budget
// and metrics scrape agree with that configuration.
import { readdir, readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1'
import { Deployment } from 'kubernetes-models/apps/v1'
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1'
import { ConfigMap, Namespace, Secret, Service } from 'kubernetes-models/v1'
import type { IContainer, IEnvVar, IPodSpec, IProbe } from 'kubernetes-models/v1'
import { describe, expect, it } from 'vitest'
import { parse, parseAllDocuments } from 'yaml'
import { parseConfigText } from '../../src/config/load.ts'
import { authConfigured } from '../../src/config/open-listener.ts'
import type { Config } from '../../src/config/schema.ts'

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))
const DIR = 'deploy/kubernetes/'
/** Files that are shipped beside the kustomization but not applied by it: they need the operator first. */
const NOT_APPLIED = new Set(['secret.example.yaml', 'servicemonitor.yaml'])
/** What the gateway needs after its grace to cancel what is left, mark those tasks, give its lease up and close. */
const CLOSE_MARGIN_MS = 5000
/** Values of the Secret's keys an operator would create: right in form, unlike the example's placeholders. */
const SECRET_VALUES: Record<string, string> = {
  'state-secret': 'a-state-secret-of-at-least-32-characters',
  'redis-url': 'rediss://:a-redis-password@redis.example.internal:6380/0',
}
const HEX = 'ab'.repeat(32)

interface Manifest {
  apiVersion: string
  kind: string
  metadata: { name: string, namespace?: string, labels?: Record<string, string> }
  [key: string]: unknown
}
interface Validatable { validate: () => void }

/** The models of the kinds shipped here: each validates against its Kubernetes API (or CRD) schema. */
const MODELS: Record<string, new (data: never) => Validatable> = {
  'v1/Namespace': Namespace,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
}

const read = async (file: string): Promise<string> => await readFile(`${REPO_ROOT}${file}`, 'utf8')

async function manifests (file: string): Promise<Manifest[]> {
  const docs = parseAllDocuments(await read(`${DIR}${file}`))
  if (!Array.isArray(docs)) throw new Error(`${file}: empty`)
  for (const doc of docs) expect(doc.errors, file).toEqual([])
  return docs.map((doc) => doc.toJS() as Manifest).filter((m) => m !== null)
}

/** What `kubectl apply -k` applies: the resources the kustomization lists, in its order. */
async function rendered (): Promise<Manifest[]> {
  const kustomization = parse(await read(`${DIR}kustomization.yaml`)) as { resources: string[] }
  return (await Promise.all(kustomization.resources.map(manifests))).flat()
}

function one<T = Manifest> (all: Manifest[], kind: string, name?: string): T {
  const found = all.filter((m) => m.kind === kind && (name === undefined || m.metadata.name === name))
  expect(found.map((m) => m.metadata.name), `one ${kind}${name === undefined ? '' : ` ${name}`}`).toHaveLength(1)
  return found[0] as T
}

interface Shipped {
  all: Manifest[]
  deployment: Deployment
  pod: IPodSpec
  gateway: IContainer
  config: Config
}

/** The Deployment's pod, its gateway container, and the configuration it loads with the environment it gets. */
async function shipped (): Promise<Shipped> {
  const all = await rendered()
  const deployment = one<Deployment>(all, 'Deployment')
  const pod = deployment.spec!.template.spec!
  const gateway = pod.containers.find((c) => c.name === 'gateway')!
  expect(gateway).toBeDefined()
  const configMap = one<ConfigMap>(all, 'ConfigMap')
  const volume = pod.volumes?.find((v) => v.configMap?.name === configMap.metadata!.name)
  const mount = gateway.volumeMounts?.find((m) => m.name === volume?.name)
  // The image's CMD reads /etc/mcp-task-gateway/gateway.yaml.
  expect(mount?.mountPath).toBe('/etc/mcp-task-gateway')
  expect(mount?.readOnly).toBe(true)
  const text = configMap.data?.['gateway.yaml']
  expect(text).toBeDefined()
  const env = Object.fromEntries((gateway.env ?? []).map((e: IEnvVar) => [e.name, e.value ?? secretValue(e)]))
  return { all, deployment, pod, gateway, config: parseConfigText(text!, env, 'the ConfigMap') }
}

function secretValue (env: IEnvVar): string {
  const key = env.valueFrom?.secretKeyRef?.key
  expect(key, `${env.name} has a value or a secret key`).toBeDefined()
  return SECRET_VALUES[key!] ?? (key!.endsWith('sha256') ? HEX : `value-of-${key!}`)
}

/** The container port a probe or a Service names (by name or number). */
function containerPort (container: IContainer, port: string | number | undefined): number | undefined {
  return typeof port === 'number' ? port : container.ports?.find((p) => p.name === port)?.containerPort
}

function preStopMs (container: IContainer): number {
  const command = container.lifecycle?.preStop?.exec?.command ?? []
  expect(command[0], 'preStop sleeps while the endpoints are removed').toBe('sleep')
  return Number(command[1]) * 1000
}

describe('deploy/kubernetes', () => {
  it('lists every manifest it applies in its kustomization, and every one is valid against the Kubernetes API schemas', async () => {
    const files = (await readdir(`${REPO_ROOT}${DIR}`)).filter((f) => f.endsWith('.yaml'))
    const kustomization = parse(await read(`${DIR}kustomization.yaml`)) as { resources: string[] }
    expect([...kustomization.resources, 'kustomization.yaml', ...NOT_APPLIED].sort()).toEqual(files.sort())
    for (const file of files.filter((f) => f !== 'kustomization.yaml')) {
      for (const manifest of await manifests(file)) {
        const Model = MODELS[`${manifest.apiVersion}/${manifest.kind}`]
        expect(Model, `${file}: a model for ${manifest.apiVersion} ${manifest.kind}`).toBeDefined()
        expect(() => new Model!(manifest as never).validate(), `${file}: ${manifest.kind} ${manifest.metadata.name}`).not.toThrow()
        // Each names its namespace, so that `kubectl apply -f` of one file lands where `-k` puts it.
        const namespace = manifest.kind === 'Namespace' ? manifest.metadata.name : manifest.metadata.namespace
        expect(namespace, `${file}: ${manifest.kind} ${manifest.metadata.name}`).toBe('mcp-task-gateway')
      }
    }
  })

  it('runs three replicas on Redis with auth, each with the same state secret, from the Secret', async () => {
    const { deployment, gateway, config } = await shipped()
    expect(deployment.spec!.replicas).toBe(3)
    expect(config.store.kind).toBe('redis')
    expect(config.store.kind === 'redis' && config.store.url).toBe(SECRET_VALUES['redis-url'])
    expect(config.server.stateSecret).toBe(SECRET_VALUES['state-secret'])
    expect(authConfigured(config.auth)).toBe(true)
    expect(config.server.allowUnauthenticated).toBe(false)
    // Every secret reaches the pod from a Secret, never written in the manifests.
    for (const variable of gateway.env ?? []) expect(variable.valueFrom?.secretKeyRef?.name, variable.name).toBe('mcp-task-gateway')
    // A rolling update starts a new pod before one is stopped: the stopped one hands its tasks over.
    expect(deployment.spec!.strategy?.rollingUpdate?.maxUnavailable).toBe(0)
  })

  it('ships a Secret example whose placeholders the gateway refuses until they are replaced, for every key the Deployment reads', async () => {
    const { gateway, all } = await shipped()
    const secret = (await manifests('secret.example.yaml')).find((m) => m.kind === 'Secret' && m.metadata.name === 'mcp-task-gateway') as unknown as Secret
    const keys = (gateway.env ?? []).map((e) => e.valueFrom?.secretKeyRef?.key).filter((k) => k !== undefined)
    expect(Object.keys(secret.stringData ?? {}).sort()).toEqual([...keys].sort())
    for (const value of Object.values(secret.stringData ?? {})) expect(value).toMatch(/^REPLACE/)
    const env = Object.fromEntries((gateway.env ?? []).map((e) => [e.name, secret.stringData![e.valueFrom!.secretKeyRef!.key]!]))
    const text = one<ConfigMap>(all, 'ConfigMap').data!['gateway.yaml']!
    const refused = (() => {
      try {
        parseConfigText(text, env)
        return []
      } catch (err) {
        return (err as { data?: Array<{ path: string }> }).data?.map((p) => p.path)
      }
    })()
    expect(refused).toEqual(expect.arrayContaining(['server.stateSecret', 'store.url', 'auth.tokens[0].sha256', 'admin.tokenSha256']))
  })

  it('asks /readyz for readiness and /healthz for liveness, on the port the configuration listens on', async () => {
    const { deployment, gateway, config, all } = await shipped()
    const probe = (p: IProbe | undefined, path: string): void => {
      expect(p?.httpGet?.path).toBe(path)
      expect(containerPort(gateway, p?.httpGet?.port)).toBe(config.server.port)
      expect(p?.httpGet?.scheme ?? 'HTTP').toBe(config.server.tls === undefined ? 'HTTP' : 'HTTPS')
    }
    probe(gateway.readinessProbe, '/readyz')
    probe(gateway.livenessProbe, '/healthz')
    // The probes come from the kubelet, on the pod's address.
    expect(config.server.host).toBe('0.0.0.0')
    const service = one<Service>(all, 'Service', 'mcp-task-gateway')
    expect(deployment.spec!.template.metadata!.labels).toMatchObject(service.spec!.selector!)
    expect(service.spec!.ports!.map((p) => containerPort(gateway, p.targetPort))).toEqual([config.server.port])
    // Any process serves any request: no affinity.
    expect(service.spec!.sessionAffinity ?? 'None').toBe('None')
    // Clients inside the cluster name the Service: the Host check lets them in.
    for (const host of ['mcp-task-gateway', 'mcp-task-gateway.mcp-task-gateway.svc', 'mcp-task-gateway.mcp-task-gateway.svc.cluster.local']) {
      expect(config.server.allowedHosts).toContain(host)
    }
  })

  it('stops a pod after the balancers forgot it and the gateway used its grace, and keeps two of three running through a disruption', async () => {
    const { deployment, gateway, config, pod, all } = await shipped()
    const grace = (pod.terminationGracePeriodSeconds ?? 30) * 1000
    expect(grace).toBeGreaterThanOrEqual(preStopMs(gateway) + config.server.shutdownGrace + CLOSE_MARGIN_MS)
    expect(preStopMs(gateway)).toBeGreaterThan(0)
    const budget = one<PodDisruptionBudget>(all, 'PodDisruptionBudget')
    expect(deployment.spec!.template.metadata!.labels).toMatchObject(budget.spec!.selector!.matchLabels!)
    expect(budget.spec!.maxUnavailable).toBe(1)
  })

  it('runs as a non-root user on a read-only root file system, with resources set', async () => {
    const { gateway, pod } = await shipped()
    expect(pod.securityContext?.runAsNonRoot).toBe(true)
    expect(gateway.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } })
    expect(gateway.resources?.requests).toMatchObject({ cpu: expect.anything(), memory: expect.anything() })
    expect(gateway.resources?.limits?.memory).toBeDefined()
    const tmp = gateway.volumeMounts?.find((m) => m.mountPath === '/tmp')
    expect(pod.volumes?.find((v) => v.name === tmp?.name)?.emptyDir).toBeDefined()
  })

  it('serves metrics on the admin listener, which only a Service of its own exposes, scraped with a token', async () => {
    const { gateway, config, all } = await shipped()
    expect(config.metrics).toMatchObject({ enabled: true, listener: 'admin' })
    expect(config.admin?.host).toBe('0.0.0.0')
    const admin = one<Service>(all, 'Service', 'mcp-task-gateway-admin')
    const port = admin.spec!.ports!.find((p) => containerPort(gateway, p.targetPort) === config.admin!.port)
    expect(port).toBeDefined()
    const monitor = (await manifests('servicemonitor.yaml'))[0] as unknown as ServiceMonitor
    expect(admin.metadata!.labels).toMatchObject(monitor.spec.selector.matchLabels!)
    const endpoint = monitor.spec.endpoints![0]!
    expect(endpoint).toMatchObject({ port: port!.name, path: config.metrics.path })
    expect(endpoint.authorization?.credentials?.name).toBeDefined()
  })

  it('names an image of this release', async () => {
    const { gateway } = await shipped()
    const { version } = JSON.parse(await read('package.json')) as { version: string }
    expect(gateway.image).toBe(`mcp-task-gateway:${version}`)
  })
})
