// The live dashboard in a real browser (headless Chromium through playwright-core; CHROMIUM_PATH, else chromium
// on the PATH): the page asks for the admin token, shows the upstreams, a task as it appears, waits for input and
// completes (pushed by the server), its detail with the timeline and the pending input request, a running task's
// elapsed time and last progress, full dates with their time zone, a cancel, an upstream error and refusals with
// who was refused. Saves a screenshot.
import { mkdirSync } from 'node:fs'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { chromium, type Browser, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sha256Hex } from '../../src/auth/bearer-tokens.ts'
import { TASK_STATUSES } from '../../src/wire/task-state.ts'
import { chromiumPath } from '../helpers/chromium.ts'
import { connectV1 } from '../helpers/clients.ts'
import { demoStdio, startGateway, type RunningGateway } from '../helpers/gateway.ts'
import { runTask, type StreamOutcome } from '../helpers/tasks.ts'

const ADMIN_TOKEN = 'dashboard-admin-token-7c41b2'
const ARTIFACTS = 'test-artifacts'
/** Longest wait for the page to show something (a bound, not a pause: every wait ends as soon as it holds). */
const SHOWN_MS = 15_000

const CHROMIUM = {
  // Without a Chromium the file fails here, naming the package to install, before any gateway starts.
  executablePath: chromiumPath(),
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
}

describe('the live dashboard in a browser', () => {
  let gw: RunningGateway
  let admin: string
  let browser: Browser
  let page: Page
  let client: Client
  /** The elicitations the client got (a pending one may be delivered on more than one stream) and their held answers. */
  const asked: Array<Record<string, unknown>> = []
  const held: Array<() => void> = []
  let answered = false
  /** The user answers: every held delivery of the question gets the answer. */
  const answer = (): void => {
    answered = true
    for (const release of held.splice(0)) release()
  }

  beforeAll(async () => {
    gw = await startGateway({
      upstreams: [demoStdio()],
      // One live task per principal: the second is refused, and the refusal names who asked.
      tasks: { pollInterval: '50ms', maxActivePerPrincipal: 1 },
      server: { shutdownGrace: '100ms', maxBodyBytes: '16kb' },
      admin: { port: 0, tokenSha256: sha256Hex(ADMIN_TOKEN) },
    })
    admin = await gw.gateway.admin!.listen({ host: '127.0.0.1', port: 0 })
    client = await connectV1(gw.url, {
      onElicit: async (params) => {
        asked.push(params)
        if (!answered) await new Promise<void>((resolve) => { held.push(resolve) })
        return { action: 'accept', content: { name: 'Teal' } }
      },
    })
    browser = await chromium.launch(CHROMIUM)
    // A zone that is not the machine's (UTC here): the page must say which zone its times are in.
    page = await browser.newPage({ viewport: { width: 1280, height: 900 }, locale: 'en-US', timezoneId: 'Asia/Kolkata' })
    page.setDefaultTimeout(SHOWN_MS)
  })

  afterAll(async () => {
    await browser?.close()
    await client?.close()
    await gw?.close()
  })

  it('serves the page and its files without the token, with a strict content security policy; the data needs the token', async () => {
    const pageResponse = await fetch(`${admin}/admin/dashboard`)
    expect(pageResponse.status).toBe(200)
    expect(pageResponse.headers.get('content-type')).toMatch(/^text\/html/)
    expect(pageResponse.headers.get('content-security-policy')).toContain("script-src 'self'")
    expect(await pageResponse.text()).toContain('<script type="module" src="/admin/dashboard/dashboard.js">')
    const files = [['dashboard.js', /^text\/javascript/], ['dashboard-view.js', /^text\/javascript/], ['task-states.js', /^text\/javascript/], ['dashboard.css', /^text\/css/]] as const
    for (const [file, type] of files) {
      const asset = await fetch(`${admin}/admin/dashboard/${file}`)
      expect({ file, status: asset.status }).toEqual({ file, status: 200 })
      expect(asset.headers.get('content-type')).toMatch(type)
    }
    const root = await fetch(`${admin}/`, { redirect: 'manual' })
    expect({ status: root.status, location: root.headers.get('location') }).toEqual({ status: 302, location: '/admin/dashboard' })

    for (const authorization of [undefined, 'Bearer wrong-token']) {
      const events = await fetch(`${admin}/admin/events`, { headers: authorization === undefined ? {} : { authorization } })
      expect({ authorization, status: events.status, type: events.headers.get('content-type') }).toMatchObject({ authorization, status: 401, type: expect.stringMatching(/^application\/json/) })
      expect((await events.json() as { error: { code: string } }).error.code).toBe(authorization === undefined ? 'GW_ERR_ADMIN_TOKEN_MISSING' : 'GW_ERR_ADMIN_TOKEN_INVALID')
      expect((await fetch(`${admin}/admin/problems`, { headers: authorization === undefined ? {} : { authorization } })).status).toBe(401)
    }
  })

  it('asks for the token, refuses a wrong one, then goes live and shows the upstreams', async () => {
    await page.goto(`${admin}/admin/dashboard`)
    await page.getByLabel('Admin token').fill('not-the-token')
    await page.getByRole('button', { name: 'Connect' }).click()
    await expect.poll(() => page.locator('#login-error').textContent(), { timeout: SHOWN_MS }).toContain('refused')

    await page.getByLabel('Admin token').fill(ADMIN_TOKEN)
    await page.getByRole('button', { name: 'Connect' }).click()
    await page.locator('#connection[data-state="live"]').waitFor()
    expect(await page.locator('#connection').textContent()).toBe('Live')
    const upstream = page.locator('#upstreams tbody tr').filter({ hasText: 'demo' })
    await upstream.waitFor()
    expect(await upstream.locator('td').allTextContents()).toEqual(['stdio', 'ready', '2025-11-25', expect.any(String), expect.any(String), '0', '0', '0'])
    // The token stays out of the address.
    expect(page.url()).toBe(`${admin}/admin/dashboard`)
  })

  it('shows a task as it appears, waits for input and completes, with its timeline and its input request', async () => {
    const running: Promise<StreamOutcome> = runTask(client, 'demo__ask_user', { message: 'Dashboard colour?' })
    const row = page.locator('#tasks tbody tr[data-status="input_required"]')
    await row.waitFor()
    const taskId = await row.getAttribute('data-task')
    expect(taskId).toMatch(/^[A-Za-z0-9_-]{22}$/)
    expect(await row.textContent()).toContain('waiting for the user to answer an elicitation request: Dashboard colour?')

    await page.getByRole('button', { name: `Open task ${taskId}` }).click()
    await page.locator('#detail-title', { hasText: `Task ${taskId}` }).waitFor()
    const pending = page.locator('#inputs tbody tr[data-input="pending"]')
    await pending.waitFor()
    expect(await pending.textContent()).toContain('Dashboard colour?')
    // Focus moves to the detail's heading (keyboard users land on what they opened).
    expect(await page.locator('#detail-title').evaluate((heading) => heading.ownerDocument.activeElement === heading)).toBe(true)
    expect(await page.getByRole('button', { name: 'Cancel task' }).isVisible()).toBe(true)

    // The user answers: the page follows the task to its end without being reloaded.
    await expect.poll(() => held.length, { timeout: SHOWN_MS }).toBeGreaterThan(0)
    answer()
    await page.locator(`#tasks tbody tr[data-task="${taskId}"][data-status="completed"]`).waitFor()
    await page.locator('#timeline tbody tr[data-event="status"]', { hasText: '→ completed' }).waitFor()
    const outcome = await running
    expect(outcome.error).toBeUndefined()

    const timeline = await page.locator('#timeline tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-event')))
    expect(timeline).toEqual(['created', 'input', 'status', 'input_settled', 'status', 'status'])
    expect(await page.locator('#timeline tbody tr').last().textContent()).toMatch(/result \d+ B/)
    expect(await page.locator('#inputs tbody tr[data-input="answered"]').textContent()).toContain('Teal')
    expect(await page.getByRole('button', { name: 'Cancel task' }).isVisible()).toBe(false)
    expect(asked.length).toBeGreaterThan(0)
    for (const question of asked) expect(question).toMatchObject({ message: 'Dashboard colour?' })
  })

  it('shows how long a running task has run and the last progress its upstream reported, with full dates and their zone', async () => {
    const running = runTask(client, 'demo__slow', { duration: 4000, steps: 4 }, { onprogress: () => {} })
    const row = page.locator('#tasks tbody tr[data-status="working"]')
    await row.waitFor()
    const cells = row.locator('td')
    // Status, tool, principal, created, updated, elapsed, last progress, message.
    await expect.poll(async () => await cells.nth(6).textContent(), { timeout: SHOWN_MS }).toMatch(/^[1-3]\/4 · step [1-3]\/4 · /)
    expect(await cells.nth(6).textContent()).toMatch(/GMT\+5:30$/)
    const first = await cells.nth(5).textContent()
    expect(first).toMatch(/^\d+ s$/)
    // The elapsed time moves on by itself.
    await expect.poll(async () => await cells.nth(5).textContent(), { timeout: SHOWN_MS }).not.toBe(first)
    // Created: the date, the time and the zone, in the browser's zone.
    expect(await cells.nth(3).textContent()).toMatch(/^[A-Z][a-z]{2} \d{1,2}, \d{4}, \d\d:\d\d:\d\d GMT\+5:30$/)
    const created = await cells.nth(3).locator('time').getAttribute('datetime')
    expect(await cells.nth(3).locator('time').getAttribute('title')).toBe(new Date(created!).toISOString())

    const taskId = await row.getAttribute('data-task')
    expect((await running).result).toBeDefined()
    const done = page.locator(`#tasks tbody tr[data-task="${taskId}"][data-status="completed"] td`)
    await done.first().waitFor()
    expect(await done.nth(5).textContent()).toMatch(/^[4-9] s$/)
    expect(await done.nth(6).textContent()).toBe('–')
  })

  it('cancels a running task from its detail', async () => {
    const running = runTask(client, 'demo__slow', { duration: 60_000, steps: 1 })
    const row = page.locator('#tasks tbody tr[data-status="working"]')
    await row.waitFor()
    const taskId = await row.getAttribute('data-task')
    await page.getByRole('button', { name: `Open task ${taskId}` }).click()
    await page.locator('#detail-title', { hasText: `Task ${taskId}` }).waitFor()
    page.once('dialog', (dialog) => { void dialog.accept() })
    await page.getByRole('button', { name: 'Cancel task' }).click()
    await page.locator(`#tasks tbody tr[data-task="${taskId}"][data-status="cancelled"]`).waitFor()
    await page.locator('#summary', { hasText: 'cancelled by the operator' }).waitFor()
    expect((await running).statuses.at(-1)).toBe('cancelled')
    // An ended task offers no cancel; the status filter offers every status of the status machine.
    expect(await page.getByRole('button', { name: 'Cancel task' }).isHidden()).toBe(true)
    expect(await page.locator('#status-filter option').evaluateAll((options) => options.map((option) => option.getAttribute('value'))))
      .toEqual(['', ...TASK_STATUSES])
    // The focus goes back to the detail's heading (the button is gone); Escape closes the detail and leaves
    // the focus on the task list.
    const focused = (id: string): Promise<boolean> => page.locator(`#${id}`).evaluate((node) => node.ownerDocument.activeElement === node)
    await expect.poll(() => focused('detail-title'), { timeout: SHOWN_MS }).toBe(true)
    await page.keyboard.press('Escape')
    await page.locator('#detail').waitFor({ state: 'hidden' })
    expect(await focused('tasks-title')).toBe(true)
  })

  it('shows refusals and upstream errors as they happen, with their counts, and saves a screenshot', async () => {
    await expect(client.callTool({ name: 'demo__throw_error', arguments: { code: -32011, message: 'quota exceeded' } })).rejects.toThrow(/quota exceeded/)
    const failed = page.locator('#problem-counts tbody tr', { hasText: 'upstream demo' })
    await failed.waitFor()
    expect(await failed.locator('td').allTextContents()).toEqual(['error', 'RPC_ERROR', 'upstream demo', '1'])
    expect(await page.locator('#problem-recent tbody tr').first().textContent()).toContain('quota exceeded')

    const tooLarge = await fetch(gw.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { padding: 'x'.repeat(32 * 1024) } }),
    })
    expect(tooLarge.status).toBe(413)
    const count = page.locator('#problem-counts tbody tr', { hasText: 'maxBodyBytes' })
    await count.waitFor()
    expect(await count.locator('td').allTextContents()).toEqual(['refusal', 'GW_ERR_HTTP_BODY_TOO_LARGE', 'maxBodyBytes', '1'])
    const tooLargeRow = page.locator('#problem-recent tbody tr').first()
    expect(await tooLargeRow.textContent()).toContain('maxBodyBytes')
    // Refused before anyone authenticated: the address only.
    expect(await tooLargeRow.locator('td').nth(3).textContent()).toBe('from 127.0.0.1')

    // A second live task of the same principal is refused: the panel names the principal (a session without
    // auth by its fingerprint, as in the logs) and its address.
    const slow = runTask(client, 'demo__slow', { duration: 60_000, steps: 1 })
    await page.locator('#tasks tbody tr[data-status="working"]').waitFor()
    const refused = await runTask(client, 'demo__echo', { text: 'one too many' })
    expect(refused.error?.message).toMatch(/GW_ERR_TASK_LIMIT|at once|active/i)
    const limitRow = page.locator('#problem-recent tbody tr', { hasText: 'maxActivePerPrincipal' }).first()
    await limitRow.waitFor()
    expect(await limitRow.locator('td').nth(3).textContent()).toMatch(/^anonymous:sha256:[0-9a-f]{12} from 127\.0\.0\.1$/)
    const working = await page.locator('#tasks tbody tr[data-status="working"]').getAttribute('data-task')
    await client.experimental.tasks.cancelTask(working!)
    expect((await slow).statuses.at(-1)).toBe('cancelled')

    // The completed task's detail, for the record.
    await page.locator('#tasks tbody tr[data-status="completed"]', { hasText: 'demo / ask_user' }).locator('button').click()
    await page.locator('#timeline tbody tr[data-event="input"]').waitFor()
    mkdirSync(ARTIFACTS, { recursive: true })
    await page.screenshot({ path: `${ARTIFACTS}/dashboard.png`, fullPage: true })
  })
})
