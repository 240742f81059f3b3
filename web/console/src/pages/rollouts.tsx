// Rollouts: to be built (stub so that pages/index.ts is final).

import type { PageDef } from "../page";
import { Empty, PageHeader } from "../ui";

function Rollouts() {
  return (
    <>
      <PageHeader title="Rollouts" />
      <Empty>Not built yet.</Empty>
    </>
  );
}

const pages: PageDef[] = [{ path: "/rollouts", name: "rollouts", title: "Rollouts", nav: "Rollouts", order: 7, component: Rollouts }];
export default pages;
