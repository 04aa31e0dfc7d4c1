// Types of scripts/server-bundle.mjs, for the tests that import it.
export interface BundleManifest {
  readonly format: number
  readonly root: string
  /** The entry points' files, relative to the bundle's folder. */
  readonly entries: { readonly server: string; readonly cli: string }
  readonly externalPackages: ReadonlyArray<string>
  /** Each file the bundle was made from, relative to the root: [size, modification time in ms]. */
  readonly inputs: Record<string, [number, number]>
  /** Each file of the bundle, relative to its folder: the files it was made from. */
  readonly chunks: Record<string, ReadonlyArray<string>>
}
export declare const BUNDLE_FORMAT: number
export declare const BUNDLED_PACKAGES: ReadonlyArray<string>
export declare const projectRoot: () => string
export declare const bundleDir: (root?: string) => string
export declare const ENTRIES: { readonly server: string; readonly cli: string }
export declare const freshBundle: (root?: string, dir?: string, which?: "server" | "cli") => { readonly entry: URL | undefined; readonly reason: string }
export declare const buildServerBundle: (root?: string, dir?: string) => Promise<BundleManifest>
