// The dashboard's rendering: tables and the task detail built from the admin API's JSON with DOM calls. Text
// only: nothing from the data is ever parsed as HTML.
import { TERMINAL_STATUSES } from './task-states.js'

export const $ = (id) => document.getElementById(id)

/** The gateway process the dashboard talks to (marked in process columns). */
let self = ''

export function setProcess (id) {
  self = id
}

// ── rendering helpers: text only, never HTML from data ────────────────────────────────────────────────────

function el (tag, attributes = {}, ...children) {
  const node = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue
    if (name === 'text') node.textContent = String(value)
    else if (name === 'class') node.className = value
    else node.setAttribute(name, value === true ? '' : String(value))
  }
  for (const child of children) if (child !== undefined && child !== null) node.append(child)
  return node
}

function cell (content, attributes = {}) {
  return el('td', attributes, content instanceof window.Node ? content : document.createTextNode(content ?? ''))
}

/**
 * A time in full, in the browser's locale and time zone, with the zone's name (`28 Nov 2026, 10:04:05 UTC`):
 * a screenshot or a copied row says when, wherever it is read; the tooltip holds it in ISO 8601 (UTC).
 * `precise` adds milliseconds (timelines).
 */
function time (iso, precise = false) {
  if (!iso) return el('span', { class: 'muted', text: '–' })
  const date = new Date(iso)
  const text = date.toLocaleString([], {
    hour12: false,
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    ...(precise && { fractionalSecondDigits: 3 }),
    timeZoneName: 'short',
  })
  return el('time', { datetime: iso, title: date.toISOString(), text })
}

/** A span of time as people say it: `45 s`, `3 min 05 s`, `2 h 07 min`, `3 d 4 h`. */
export function duration (ms) {
  const s = Math.max(0, Math.floor(ms / 1000))
  if (s < 60) return `${s} s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m} min ${String(s % 60).padStart(2, '0')} s`
  const h = Math.floor(m / 60)
  if (h < 24) return `${h} h ${String(m % 60).padStart(2, '0')} min`
  return `${Math.floor(h / 24)} d ${h % 24} h`
}

/**
 * How long a task has run (still running: counted on by `tickElapsed` every second) or ran (ended: from its
 * creation to its last move).
 */
function elapsed (task) {
  if (TERMINAL_STATUSES.includes(task.status)) {
    return el('span', { class: 'elapsed', title: 'from creation to its end', text: duration(Date.parse(task.lastUpdatedAt) - Date.parse(task.createdAt)) })
  }
  return el('span', { class: 'elapsed', 'data-since': task.createdAt, title: 'running for', text: duration(Date.now() - Date.parse(task.createdAt)) })
}

/** Moves every running task's elapsed time on to now. */
export function tickElapsed () {
  const now = Date.now()
  for (const node of document.querySelectorAll('[data-since]')) node.textContent = duration(now - Date.parse(node.dataset.since))
}

/** The last progress the upstream reported on a running task (`2/5 · step 2/5 · 12 s ago`), as the feed brought it. */
function progressText (task, progress) {
  if (progress === undefined || TERMINAL_STATUSES.includes(task.status)) return el('span', { class: 'muted', text: '–' })
  const amount = progress.total === undefined ? String(progress.progress) : `${progress.progress}/${progress.total}`
  return el('span', { class: 'progress', title: `reported ${new Date(progress.at).toISOString()}` },
    [amount, progress.message].filter(Boolean).join(' · '), ' · ', time(progress.at))
}

/** Who was refused: the principal as logs show it and the client address, each when the request named it. */
function requester (problem) {
  if (problem.principal === undefined && problem.address === undefined) return el('span', { class: 'muted', text: '–' })
  return el('span', { class: 'who' }, [problem.principal, problem.address && `from ${problem.address}`].filter(Boolean).join(' '))
}

function badge (status) {
  return el('span', { class: `badge ${status}`, text: status })
}

function processName (id) {
  if (!id) return el('span', { class: 'muted', text: '–' })
  const mine = id === self
  return el('span', { class: mine ? 'process mine' : 'process', title: id, text: mine ? `${id.slice(0, 8)} (this one)` : id.slice(0, 8) })
}

function bytes (n) {
  if (n === null || n === undefined) return ''
  return n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} kB` : `${(n / 1024 / 1024).toFixed(1)} MB`
}

function compact (value) {
  const text = JSON.stringify(value)
  return text.length > 300 ? `${text.slice(0, 300)}…` : text
}

function replaceRows (tbody, rows) {
  tbody.replaceChildren(...rows)
}

// ── upstreams and problems ───────────────────────────────────────────────────────────────────────────────

export function renderUpstreams (upstreams) {
  replaceRows($('upstreams').tBodies[0], upstreams.map((u) => el('tr', {},
    el('th', { scope: 'row', text: u.name }),
    cell(u.transport),
    cell(el('span', { class: `badge up-${u.state}`, text: u.state, title: u.draining === undefined ? (u.reason ?? '') : `${u.draining.why} by a configuration reload; calls still running are cancelled at ${time(u.draining.graceEndsAt)}` })),
    cell(u.era ?? '–'),
    cell(String(u.sessions), { class: 'num' }),
    cell(u.processes === undefined ? '–' : String(u.processes), { class: 'num' }),
    cell(String(u.calls.active), { class: 'num' }),
    cell(String(u.calls.waiting), { class: 'num' }),
    cell(String(u.calls.parked), { class: 'num' }),
  )))
}

export function renderProblems (problems) {
  $('problems-off').hidden = problems !== null
  const counts = problems?.counts ?? []
  const recent = problems?.recent ?? []
  $('problems-empty').hidden = problems === null || counts.length > 0
  $('problem-counts').hidden = counts.length === 0
  $('problem-recent').hidden = recent.length === 0
  replaceRows($('problem-counts').tBodies[0], counts.map((c) => el('tr', {},
    cell(el('span', { class: `badge ${c.kind}`, text: c.kind })), cell(c.code), cell(c.source), cell(String(c.count), { class: 'num' }))))
  replaceRows($('problem-recent').tBodies[0], recent.map((p) => el('tr', {},
    cell(time(new Date(p.at).toISOString())), cell(el('span', { class: `badge ${p.kind}`, text: p.kind })), cell(p.source), cell(requester(p)), cell(p.message, { class: 'message' }))))
}

// ── tasks ─────────────────────────────────────────────────────────────────────────────────────────────────

/** The task list; `more` when the list was cut at its length; `progress`: task id → its last reported progress. */
export function renderTaskRows (tasks, openTask, more, progress) {
  replaceRows($('tasks').tBodies[0], tasks.map((task) => el('tr', { 'data-task': task.id, 'data-status': task.status, class: task.id === openTask ? 'open' : undefined },
    el('th', { scope: 'row' }, el('button', { type: 'button', class: 'link', 'data-open': task.id, 'aria-label': `Open task ${task.id}`, text: task.id.slice(0, 10) })),
    cell(badge(task.status)),
    cell(`${task.upstream} / ${task.tool}`),
    cell(task.principal),
    cell(time(task.createdAt)),
    cell(time(task.lastUpdatedAt)),
    cell(elapsed(task), { class: 'num' }),
    cell(progressText(task, progress.get(task.id)), { 'data-progress': '' }),
    cell(task.statusMessage ?? '', { class: 'message' }),
  )))
  $('tasks-empty').hidden = tasks.length > 0
  $('task-count').textContent = `(${tasks.length}${more ? '+' : ''})`
}

// ── one task ──────────────────────────────────────────────────────────────────────────────────────────────

const EVENT_TEXT = {
  created: () => ['Created', ''],
  status: (e) => [`→ ${e.status}`, [e.statusMessage, e.resultBytes !== undefined ? `result ${bytes(e.resultBytes)}` : ''].filter(Boolean).join(' · ')],
  input: (e) => ['Input requested', `${e.method} (${e.key})`],
  input_settled: (e) => [e.state === 'answered' ? 'Input answered' : 'Input expired', e.key],
  claimed: (e) => ['Taken over', `from process ${e.from}`],
}

function outcomeText (task) {
  const { outcome } = task
  if (outcome === null) return '–'
  const size = bytes(task.resultBytes)
  if (outcome.kind === 'error') return `JSON-RPC error ${outcome.code}: ${outcome.message} · ${size}`
  return `${outcome.isError ? 'tool result with isError' : 'tool result'} · ${size}`
}

/** A task as GET /admin/tasks/:id gives it: summary, timeline, input requests (and the cancel button while it runs). */
export function renderTaskDetail (task, progress) {
  $('detail').hidden = false
  $('detail-title').textContent = `Task ${task.id}`
  $('cancel').hidden = TERMINAL_STATUSES.includes(task.status)
  $('cancel').disabled = false
  const facts = [
    ['Status', badge(task.status)], ['Message', task.statusMessage ?? '–'], ['Tool', `${task.upstream} / ${task.tool}`],
    ['Principal', task.principal], ['Era', task.era], ['Created', time(task.createdAt)], ['Updated', time(task.lastUpdatedAt)],
    [TERMINAL_STATUSES.includes(task.status) ? 'Took' : 'Running for', elapsed(task)], ['Last progress', progressText(task, progress)],
    ['Runs on', processName(task.owner)], ['Result', outcomeText(task)],
  ]
  $('summary').replaceChildren(...facts.flatMap(([term, value]) => [el('dt', { text: term }), el('dd', {}, value)]))
  replaceRows($('timeline').tBodies[0], task.timeline.map((entry) => {
    const [what, details] = (EVENT_TEXT[entry.type] ?? (() => [entry.type, '']))(entry)
    return el('tr', { 'data-event': entry.type }, cell(time(entry.at, true)), cell(what), cell(details, { class: 'message' }), cell(processName(entry.process)))
  }))
  replaceRows($('inputs').tBodies[0], task.inputs.map((input) => el('tr', { 'data-input': input.state },
    cell(time(input.createdAt, true)), cell(input.method), cell(badge(input.state)),
    cell(typeof input.params.message === 'string' ? input.params.message : compact(input.params), { class: 'message' }),
    cell(input.answer === null ? '–' : compact(input.answer.result ?? input.answer.error), { class: 'message' }))))
  $('inputs-empty').hidden = task.inputs.length > 0
  $('inputs').hidden = task.inputs.length === 0
  for (const row of $('tasks').tBodies[0].rows) row.classList.toggle('open', row.dataset.task === task.id)
}
