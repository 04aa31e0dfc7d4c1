import { html } from "../lib.js"

export default function Page() {
  return html`<h1>admin</h1>`
}
