/**
 * The testing kit (`import { TestGateway, FakeProvider, TestTime } from "spendgate/testing"`):
 * a whole gateway in memory on a TestClock, providers whose calls are
 * scripted, payment rails that pay on command, and helpers that move time.
 * See docs/testing.md.
 */
export * as FakeProvider from "./FakeProvider.ts"
export * as FakeRails from "./FakeRails.ts"
export { TestRails } from "./FakeRails.ts"
export * as TestGateway from "./TestGateway.ts"
export * as TestTime from "./TestTime.ts"
