// Stands in for modules that @grafana/ui imports but the flame graph never
// runs (react-router-dom, for links): the bundle needs something to resolve.
export const Route = () => null;
export const useHistory = () => ({ push() {}, replace() {}, location: {} });
export const useLocation = () => ({ pathname: "/", search: "", hash: "" });
export const Link = () => null;
export default {};
