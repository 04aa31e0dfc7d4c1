/**
 * The package entry point (`import { Spendgate, Agents, Spend } from "spendgate"`):
 * the core's services, ports and types, and the ready layers of
 * {@link Spendgate} that wire them to storage. The core alone, without any
 * adapter, is `spendgate/core`.
 */
export * from "../../src/index.ts"
export * as Spendgate from "./Spendgate.ts"
export { createGateway, SpendgateError } from "./createGateway.ts"
export type {
  CreditInput,
  Gateway as PromiseGateway,
  GatewayOptions,
  GatewayStorage,
  PolicyInput,
  SpendInput,
  TransactionsInput
} from "./createGateway.ts"
