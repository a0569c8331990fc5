// How a file joined a bundle when ranking did not place it (docs/protocol.md `via`), in words and as an icon.

export interface ViaLabel {
    text: string;
    icon: string;
}

const LABELS: Record<string, ViaLabel> = {
    graph: { text: 'via graph', icon: '$(type-hierarchy)' },
    entry: { text: 'entry point', icon: '$(debug-start)' },
    flow: { text: 'from a cached answer', icon: '$(history)' },
};

/** The label of an appended file; undefined for files search ranked. */
export function viaLabel(via: string | undefined): ViaLabel | undefined {
    return via === undefined ? undefined : LABELS[via];
}
