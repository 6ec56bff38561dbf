// REST routes derived from the google.api.http annotations of the services'
// descriptors (plus the gateway options in pulsebase/common/v1/options.proto).
// The table refuses duplicate or ambiguous routes at start-up.
import { getOption, type DescMethod, type DescService } from "@bufbuild/protobuf";
import type { HttpRule } from "../../../gen/google/api/http_pb.js";
import type { ServiceBinding } from "../../kernel/module.js";
import {
  auth as authOption,
  Auth,
  rest_multipart,
  rest_passthrough,
  rest_raw_query,
  rest_status,
} from "../../../gen/pulsebase/common/v1/options_pb.js";

export type HttpVerb = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface RestRoute {
  verb: HttpVerb;
  /** The annotation's template, e.g. /api/consumer/{id}. */
  template: string;
  /** Fastify form, e.g. /api/consumer/:id. */
  path: string;
  pathParams: string[];
  /** "" (no body), "*" (whole body) or a field name. */
  body: string;
  responseBody: string;
  service: DescService;
  method: DescMethod;
  auth: Auth;
  status: number;
  multipart: boolean;
  rawQueryField: string;
  passthrough: boolean;
  /** platform or cms: which envelope errors use. */
  iface: "platform" | "cms";
}

function rulePattern(rule: HttpRule): { verb: HttpVerb; template: string } | undefined {
  switch (rule.pattern.case) {
    case "get": return { verb: "GET", template: rule.pattern.value };
    case "post": return { verb: "POST", template: rule.pattern.value };
    case "put": return { verb: "PUT", template: rule.pattern.value };
    case "patch": return { verb: "PATCH", template: rule.pattern.value };
    case "delete": return { verb: "DELETE", template: rule.pattern.value };
    default: return undefined;
  }
}

const SEGMENT_RE = /^(?:[A-Za-z0-9_.~-]+|\{([a-z_][a-z0-9_]*)\})$/;

/** Parses /a/{b}/c into the Fastify path; only simple variables are supported. */
export function parseTemplate(template: string): { path: string; params: string[]; shape: string } {
  if (!template.startsWith("/")) throw new Error(`route template must start with "/": ${template}`);
  const params: string[] = [];
  const segs = template.slice(1).split("/").map((seg) => {
    const m = SEGMENT_RE.exec(seg);
    if (!m) throw new Error(`unsupported route segment "${seg}" in ${template}`);
    if (m[1]) {
      if (params.includes(m[1])) throw new Error(`duplicate path variable {${m[1]}} in ${template}`);
      params.push(m[1]);
      return { path: `:${m[1]}`, shape: "*" };
    }
    return { path: seg, shape: seg };
  });
  return { path: "/" + segs.map((s) => s.path).join("/"), params, shape: "/" + segs.map((s) => s.shape).join("/") };
}

export class RouteTable {
  readonly routes: RestRoute[] = [];
  private readonly shapes = new Map<string, RestRoute>();

  /** The REST routes of a bound service, from each method's record (its httpRules). */
  addService(binding: ServiceBinding): void {
    const service = binding.service;
    const iface = service.typeName.startsWith("pulsebase.cms.") ? "cms" : "platform";
    for (const m of binding.methods.values()) {
      for (const r of m.httpRules) this.addRule(service, m.desc, r, iface);
    }
  }

  private addRule(service: DescService, method: DescMethod, rule: HttpRule, iface: "platform" | "cms"): void {
    const pat = rulePattern(rule);
    const where = `${service.typeName}.${method.name}`;
    if (!pat) throw new Error(`${where}: unsupported http rule pattern`);
    const { path, params, shape } = parseTemplate(pat.template);
    const key = `${pat.verb} ${shape}`;
    const prior = this.shapes.get(key);
    if (prior) {
      throw new Error(`duplicate REST route ${pat.verb} ${pat.template} (${where} and ${prior.service.typeName}.${prior.method.name})`);
    }
    const body = rule.body;
    if (body && pat.verb === "GET") throw new Error(`${where}: GET routes cannot declare a body`);
    const input = method.input;
    const passthrough = getOption(method, rest_passthrough);
    // Passthrough requests carry path variables in HttpRequest.path_params.
    for (const p of passthrough ? [] : params) {
      if (!input.fields.some((f) => f.name === p)) throw new Error(`${where}: path variable {${p}} is not a request field`);
    }
    if (body && body !== "*" && !input.fields.some((f) => f.name === body)) throw new Error(`${where}: body field ${body} does not exist`);
    if (rule.responseBody && !method.output.fields.some((f) => f.name === rule.responseBody)) {
      throw new Error(`${where}: response_body field ${rule.responseBody} does not exist`);
    }
    const rawQueryField = getOption(method, rest_raw_query);
    const route: RestRoute = {
      verb: pat.verb,
      template: pat.template,
      path,
      pathParams: params,
      body,
      responseBody: rule.responseBody,
      service,
      method,
      auth: getOption(method, authOption),
      status: getOption(method, rest_status) || 200,
      multipart: getOption(method, rest_multipart),
      rawQueryField,
      passthrough,
      iface,
    };
    this.shapes.set(key, route);
    this.routes.push(route);
  }
}
