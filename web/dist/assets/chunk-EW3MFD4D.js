import{a,b}from"./chunk-O3EX6V6I.js";import"./chunk-6GU2PLKT.js";export{b as sessionsPage,a as usageBySession};
