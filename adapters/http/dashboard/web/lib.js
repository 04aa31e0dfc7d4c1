// Shared helpers of the dashboard: rendering, the API client, routing and
// formatting. The session lives in an HttpOnly cookie the page cannot read;
// the CSRF token the server hands out with the session is kept in memory only.
import { h, render, Fragment } from "./vendor/preact.mjs"
import { useState, useEffect, useCallback, useRef, useMemo } from "./vendor/hooks.mjs"
import htm from "./vendor/htm.mjs"

export const html = htm.bind(h)
export { render, Fragment, useState, useEffect, useCallback, useRef, useMemo }

let csrfToken = null
/** Dispatched on window when an API call answers 401: the session is gone. */
export const SESSION_ENDED = "spendgate:session-ended"
/** Set from the session answer; sent as X-CSRF-Token on every change. */
export const setCsrfToken = (token) => { csrfToken = token }

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message)
    this.status = status
    this.code = code
    this.details = details
  }
}

/**
 * Calls the server with the session cookie. `query` values that are
 * undefined, null or "" are left out. Answers the decoded JSON (or the text
 * for non-JSON answers); throws ApiError with the envelope's code and message.
 */
export async function api(path, { method = "GET", body, query, headers = {} } = {}) {
  let url = path
  if (query) {
    const params = new URLSearchParams()
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined && value !== null && value !== "") params.set(key, String(value))
    }
    const text = params.toString()
    if (text) url += (url.includes("?") ? "&" : "?") + text
  }
  const init = { method, credentials: "same-origin", headers: { accept: "application/json", ...headers } }
  if (method !== "GET" && method !== "HEAD" && csrfToken) init.headers["x-csrf-token"] = csrfToken
  if (body !== undefined) {
    init.headers["content-type"] = "application/json"
    init.body = JSON.stringify(body)
  }
  const response = await fetch(url, init)
  const type = response.headers.get("content-type") ?? ""
  const payload = response.status === 204 ? null : type.includes("json") ? await response.json() : await response.text()
  if (!response.ok) {
    // The session ended (signed out elsewhere, idle, key rotated): the shell shows the sign-in page.
    if (response.status === 401 && path !== "/session") dispatchEvent(new Event(SESSION_ENDED))
    const error = payload && typeof payload === "object" && payload.error ? payload.error : {}
    throw new ApiError(response.status, error.code ?? `HTTP_${response.status}`, error.message ?? response.statusText, error.details)
  }
  return payload
}

/** Runs `load` on mount and whenever `deps` change: { data, error, loading, reload }. */
export function useApi(load, deps = []) {
  const [state, setState] = useState({ data: undefined, error: undefined, loading: true })
  const [tick, setTick] = useState(0)
  useEffect(() => {
    let live = true
    setState((previous) => ({ ...previous, loading: true }))
    Promise.resolve().then(load).then(
      (data) => live && setState({ data, error: undefined, loading: false }),
      (error) => live && setState({ data: undefined, error, loading: false })
    )
    return () => { live = false }
  }, [...deps, tick])
  return { ...state, reload: useCallback(() => setTick((n) => n + 1), []) }
}

// Routing: the part of the address after "#", e.g. "#/agents/agt_1?status=x".
const routeOf = (hash) => {
  const raw = hash.replace(/^#/, "") || "/"
  const [path, search = ""] = raw.split("?")
  return { path, query: Object.fromEntries(new URLSearchParams(search)) }
}
export const navigate = (path) => { location.hash = path }
export function useRoute() {
  const [hash, setHash] = useState(() => location.hash)
  useEffect(() => {
    const update = () => setHash(location.hash)
    addEventListener("hashchange", update)
    // The address may have changed between the first render and this effect (a link followed,
    // or a page's address set, at once after sign-in): that change fired no event we heard.
    update()
    return () => removeEventListener("hashchange", update)
  }, [])
  return useMemo(() => routeOf(hash), [hash])
}
/** Matches "/agents/:id" against a path: the params, or null. */
export const matchRoute = (pattern, path) => {
  const names = []
  const regex = new RegExp("^" + pattern.replace(/:([a-zA-Z]+)/g, (_, name) => (names.push(name), "([^/]+)")) + "$")
  const found = regex.exec(path)
  return found ? Object.fromEntries(names.map((name, i) => [name, decodeURIComponent(found[i + 1])])) : null
}

// Money: the API speaks USD cents (possibly fractional) and sats.
export const formatUsdCents = (cents) => {
  if (cents === null || cents === undefined) return "—"
  const dollars = cents / 100
  const digits = Math.abs(dollars) > 0 && Math.abs(dollars) < 0.01 ? 6 : 2
  return dollars.toLocaleString("en-US", { style: "currency", currency: "USD", minimumFractionDigits: 2, maximumFractionDigits: digits })
}
export const formatSats = (sats) => (sats === null || sats === undefined ? "—" : `${Number(sats).toLocaleString("en-US")} sats`)
export const formatTime = (iso) => (iso ? new Date(iso).toLocaleString() : "—")

/** A message for an ApiError (or any error) shown to the person. */
export const errorText = (error) => (error instanceof ApiError ? `${error.message} (${error.code})` : String(error?.message ?? error))
export const ErrorNote = ({ error }) => error ? html`<p class="error" role="alert">${errorText(error)}</p>` : null

// ---- shared components ---------------------------------------------------------

/** Copies `text` to the clipboard; says so in a live region. */
export function CopyButton({ text, label = "Copy" }) {
  const [state, setState] = useState("")
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text)
      setState("Copied")
    } catch {
      setState("Copy failed: select the text and copy it")
    }
  }
  return html`<span class="copy">
    <button type="button" class="secondary" onClick=${copy}>${label}</button>
    <span class="muted small" role="status" aria-live="polite">${state}</span>
  </span>`
}

/**
 * A modal confirmation (the native <dialog>: focus stays inside, Escape
 * cancels). Rendered while `open`; `onConfirm` / `onCancel` close it.
 */
export function ConfirmDialog({ open, title, children, confirmLabel, danger = false, onConfirm, onCancel }) {
  const ref = useRef(null)
  useEffect(() => {
    const dialog = ref.current
    if (!dialog) return
    if (open && !dialog.open) dialog.showModal()
    if (!open && dialog.open) dialog.close()
  }, [open])
  if (!open) return null
  return html`<dialog ref=${ref} class="confirm" aria-labelledby="confirm-title" onCancel=${(e) => { e.preventDefault(); onCancel() }}>
    <h2 id="confirm-title">${title}</h2>
    <div>${children}</div>
    <p class="row">
      <button type="button" class=${danger ? "danger" : ""} onClick=${onConfirm}>${confirmLabel}</button>
      <button type="button" class="secondary" onClick=${onCancel}>Cancel</button>
    </p>
  </dialog>`
}

/** The account's wallet: both pockets and what they are worth together. */
export function WalletSummary({ wallet }) {
  if (!wallet) return null
  return html`<dl class="wallet" aria-label="Wallet">
    <div><dt>USD pocket</dt><dd data-testid="balance-usd">${formatUsdCents(wallet.balanceUsdCents)}</dd></div>
    <div><dt>Sats pocket</dt><dd data-testid="balance-sats">${formatSats(wallet.balanceSats)}</dd></div>
    <div><dt>Spendable</dt><dd data-testid="spendable">${formatUsdCents(wallet.spendableUsdCents)}</dd></div>
  </dl>`
}

/** A status badge of an agent. */
export const AgentStatus = ({ agent }) =>
  agent.killed
    ? html`<span class="badge killed">Killed${agent.killReason === "velocity" ? " (velocity limit)" : ""}</span>`
    : html`<span class="badge active">Active</span>`

/** Cents to a dollar amount for an input ("12.5"); and back (null for ""). */
export const centsToDollarsInput = (cents) => (cents === null || cents === undefined ? "" : String(Math.round(cents * 100) / 10000))
export const dollarsInputToCents = (text) => {
  const value = Number(String(text).trim())
  if (String(text).trim() === "" || !Number.isFinite(value) || value < 0) return undefined
  return Math.round(value * 1_000_000) / 10_000
}
