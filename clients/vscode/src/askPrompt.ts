// The Ask prompt: a QuickPick offering the cached questions (codeloupe/flows, fresh ones first) plus what is typed.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { type CachedFlow, FlowsRequest } from './protocol';
import { visibleLabel } from './visible';

interface QuestionItem extends vscode.QuickPickItem {
    question: string;
}

/** Cached questions, fresh before stale (each group keeps the server's newest-first order). */
export function cachedQuestionItems(flows: CachedFlow[]): QuestionItem[] {
    const ordered = [...flows.filter((flow) => !flow.stale), ...flows.filter((flow) => flow.stale)];
    return ordered.map((flow) => ({
        label: `$(history) ${visibleLabel(flow.question)}`,
        description: flow.stale ? 'cached, a cited file changed: asked afresh' : 'cached answer',
        question: flow.question,
    }));
}

async function cachedFlows(client: LanguageClient): Promise<CachedFlow[]> {
    try {
        return (await client.sendRequest(FlowsRequest, {})).flows;
    } catch {
        return []; // a server without the flow cache: the prompt still takes a typed question
    }
}

/** Asks for a question; resolves to it, or undefined when the prompt is dismissed. */
export async function promptQuestion(client: LanguageClient): Promise<string | undefined> {
    const picker = vscode.window.createQuickPick<QuestionItem>();
    picker.title = 'Codeloupe: Ask the Codebase';
    picker.placeholder = 'A question about this codebase, or a bug report';
    picker.ignoreFocusOut = true;
    picker.busy = true;
    let cached: QuestionItem[] = [];
    const refresh = (): void => {
        const typed = picker.value.trim();
        const own: QuestionItem[] = typed === '' || cached.some((item) => item.question === typed)
            ? [] : [{ label: visibleLabel(typed), description: 'ask', question: typed, alwaysShow: true }];
        picker.items = [...own, ...cached];
    };
    picker.onDidChangeValue(refresh);
    void cachedFlows(client).then((flows) => {
        cached = cachedQuestionItems(flows);
        picker.busy = false;
        refresh();
    });
    return new Promise((resolve) => {
        picker.onDidAccept(() => {
            const question = picker.selectedItems[0]?.question ?? picker.activeItems[0]?.question ?? picker.value.trim();
            resolve(question === '' ? undefined : question); // before hide(), whose handler resolves undefined
            picker.hide();
        });
        picker.onDidHide(() => {
            picker.dispose();
            resolve(undefined);
        });
        picker.show();
    });
}
