/**
 * The scope each `/v1` route needs of the request's key, in one table: `send` makes and cancels
 * notices, `read` reads them, `manage` changes what notices are sent under (recipient policies,
 * suppressions) and where their outcomes go (event endpoints). A route missing here is refused to
 * every key: a new route must say what it needs.
 */
import type { Scope } from '../store/api-keys.js';

export const ROUTE_SCOPES: Readonly<Record<string, Scope>> = {
  'POST /v1/notices': 'send',
  'POST /v1/notices/batch': 'send',
  'POST /v1/notices/:id/cancel': 'send',
  'GET /v1/notices': 'read',
  'GET /v1/notices/:id': 'read',
  'GET /v1/notices/:id/events': 'read',
  'GET /v1/stats': 'read',
  'PUT /v1/recipients/:id/policy': 'manage',
  'GET /v1/recipients/:id/policy': 'manage',
  'POST /v1/suppressions': 'manage',
  'GET /v1/suppressions/:channel/:address': 'manage',
  'DELETE /v1/suppressions/:channel/:address': 'manage',
  'POST /v1/event-endpoints': 'manage',
  'GET /v1/event-endpoints': 'manage',
  'DELETE /v1/event-endpoints/:id': 'manage',
  'GET /v1/event-endpoints/:id/deliveries': 'manage',
};

/** The scope a request's route needs; undefined for a route the table does not name. */
export function scopeOf(method: string, routeUrl: string | undefined): Scope | undefined {
  return routeUrl === undefined ? undefined : ROUTE_SCOPES[`${method === 'HEAD' ? 'GET' : method} ${routeUrl}`];
}
