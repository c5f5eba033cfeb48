// placeholder until FileCheck lands
