import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { storeContract } from "./store.contract.ts"

storeContract("memory", MemoryStore.layer)
