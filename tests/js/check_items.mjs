#!/usr/bin/env node
// Checks session items against the real JavaScript Agents SDK (the one skilled_crew 1.0.11 runs
// on), with no network at all.
//
//   node tests/js/check_items.mjs ITEMS.json
//
// ITEMS.json holds a JSON array of items: the parsed `item_json` values of skilled_crew's
// `session_items` rows, in order. The script
//
//   a. validates every item with the SDK's own protocol schema, `protocol.ModelItem` exported by
//      @openai/agents-core (dist/types/protocol.mjs): the zod union of every item type a model
//      input (and so a session) may hold;
//   b. builds the Responses API request from the whole history with the SDK's own request builder:
//      `OpenAIResponsesModel` of @openai/agents-openai (dist/openaiResponsesModel.mjs) on a
//      stand-in client whose `responses.create` records the request body it is given and answers
//      with an empty response; `getResponse` converts the items with the SDK's `getInputItems`,
//      the code that turns session history into the model's `input`;
//   c. prints one JSON object on stdout:
//        {"schema_errors": [{"index": i, "type": item.type, "errors": ["path: message", ...]}],
//         "request_error": null | "ErrorName: message",
//         "request_input": [...the request's `input`, as it would go on the wire...] | null}
//
// It exits 0 whatever it finds; 2 only for its own usage errors (arguments, unreadable file, not
// a JSON array).

import { readFileSync } from 'node:fs';

function usage(message) {
  process.stderr.write(`check_items: ${message}\nusage: node check_items.mjs ITEMS.json\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
if (args.length !== 1) {
  usage('expected exactly one argument: a JSON file holding an array of items');
}
let items;
try {
  items = JSON.parse(readFileSync(args[0], 'utf8'));
} catch (error) {
  usage(`cannot read ${args[0]}: ${error.message}`);
}
if (!Array.isArray(items)) {
  usage(`${args[0]} does not hold a JSON array`);
}

// No trace may be exported anywhere: tracing is off before the SDK is loaded.
process.env.OPENAI_AGENTS_DISABLE_TRACING = '1';
const { protocol, setTracingDisabled, withTrace } = await import('@openai/agents-core');
const { OpenAIResponsesModel } = await import('@openai/agents-openai');
setTracingDisabled(true);

// ---------------------------------------------------------------------------------------------
// a. The protocol schema
// ---------------------------------------------------------------------------------------------

const MEMBERS = protocol.ModelItem.options;

function literalValue(schema) {
  let def = schema?.def;
  if (def?.type === 'optional') {
    def = def.innerType?.def;
  }
  return def?.type === 'literal' ? def.values[0] : undefined;
}

/** A union member's name: its `type` literal, and its `role` for messages. */
function memberName(member) {
  const role = literalValue(member.shape.role);
  const type = literalValue(member.shape.type);
  return role === undefined ? type : `${type}(role=${role})`;
}

function pathText(path) {
  const text = path
    .map((key) => (typeof key === 'number' ? `[${key}]` : `.${String(key)}`))
    .join('')
    .replace(/^\./, '');
  return text || '(item)';
}

/** zod issues as "path: message" lines; a nested union's alternatives follow its own line. */
function issueLines(issues, prefix = []) {
  const lines = [];
  for (const issue of issues) {
    const path = [...prefix, ...issue.path];
    lines.push(`${pathText(path)}: ${issue.message}`);
    if (issue.code === 'invalid_union' && Array.isArray(issue.errors)) {
      for (const alternative of issue.errors) {
        lines.push(...issueLines(alternative, path));
      }
    }
  }
  return lines;
}

/** Whether an issue says the item is not of this member's kind (its `type` or `role`). */
function isKindMismatch(issue) {
  return (
    issue.path.length === 1 &&
    (issue.path[0] === 'type' || issue.path[0] === 'role') &&
    issue.code === 'invalid_value'
  );
}

/** The error messages of a failed `ModelItem` parse: those of the member(s) of the item's own
 * type (and role), each prefixed with the member's name; or, when no member has its type, what
 * zod said about `type` and `role`. */
function schemaErrors(item, error) {
  const [top] = error.issues;
  const perMember =
    error.issues.length === 1 &&
    top.code === 'invalid_union' &&
    top.path.length === 0 &&
    Array.isArray(top.errors) &&
    top.errors.length === MEMBERS.length;
  if (!perMember) {
    return issueLines(error.issues);
  }
  const lines = [];
  top.errors.forEach((issues, index) => {
    if (!issues.some(isKindMismatch)) {
      const name = memberName(MEMBERS[index]);
      lines.push(...issueLines(issues).map((line) => `${name}: ${line}`));
    }
  });
  if (lines.length > 0) {
    return lines;
  }
  const expected = { type: new Set(), role: new Set() };
  for (const issues of top.errors) {
    for (const issue of issues.filter(isKindMismatch)) {
      for (const value of issue.values ?? []) {
        expected[issue.path[0]].add(JSON.stringify(value));
      }
    }
  }
  const got = (key) => (item !== null && typeof item === 'object' ? item[key] : undefined);
  return [
    `${top.message}: no ModelItem member accepts type=${JSON.stringify(got('type'))} ` +
      `role=${JSON.stringify(got('role'))}`,
    `type: expected one of ${[...expected.type].join('|')}`,
    `role: expected one of ${[...expected.role].join('|')} (message items)`,
  ];
}

const schema_errors = [];
items.forEach((item, index) => {
  const parsed = protocol.ModelItem.safeParse(item);
  if (!parsed.success) {
    const type = item !== null && typeof item === 'object' ? (item.type ?? null) : null;
    schema_errors.push({ index, type, errors: schemaErrors(item, parsed.error) });
  }
});

// ---------------------------------------------------------------------------------------------
// b. The request builder
// ---------------------------------------------------------------------------------------------

const requests = [];
const client = {
  responses: {
    create(body, options) {
      requests.push({ body, options });
      return Promise.resolve({
        id: 'resp_check_items',
        object: 'response',
        created_at: 0,
        model: body.model,
        status: 'completed',
        output: [],
        usage: { input_tokens: 0, output_tokens: 0, total_tokens: 0 },
      });
    },
  },
};
const model = new OpenAIResponsesModel(client, 'gpt-4.1');

let request_error = null;
let request_input = null;
try {
  // Inside a (no-op) trace, as the Runner calls models: the model's span needs one.
  await withTrace('check_items', () =>
    model.getResponse({
      systemInstructions: undefined,
      input: structuredClone(items),
      modelSettings: {},
      tools: [],
      outputType: 'text',
      handoffs: [],
      tracing: false,
    }),
  );
  // As the OpenAI client sends it: JSON (keys whose value is undefined are left out).
  request_input = JSON.parse(JSON.stringify(requests[0].body.input));
} catch (error) {
  request_error = `${error?.name ?? 'Error'}: ${error?.message ?? String(error)}`;
}

process.stdout.write(`${JSON.stringify({ schema_errors, request_error, request_input })}\n`);
